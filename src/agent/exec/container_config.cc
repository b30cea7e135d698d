#include "agent/exec/container_config.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

namespace allot::agent {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The host's character device hostDir/name as the container's /dev/name, when the host has it.
void addDevice(json& devices, const std::string& hostDir, const std::string& name) {
  struct stat st {};
  if (::stat((hostDir + "/" + name).c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return;
  devices.push_back({{"path", "/dev/" + name},
                     {"type", "c"},
                     {"major", major(st.st_rdev)},
                     {"minor", minor(st.st_rdev)},
                     {"fileMode", 0666},
                     {"uid", 0},
                     {"gid", 0}});
}

json mount(const std::string& destination, const std::string& type, const std::string& source,
           std::vector<std::string> options) {
  return {{"destination", destination}, {"type", type}, {"source", source}, {"options", options}};
}

}  // namespace

Status checkBindSource(const std::string& dir) {
  const auto refuse = [&](const fs::path& at, const std::string& why) {
    return Status::FailedPrecondition("cannot mount " + dir +
                                      " into the container: " + at.string() + " " + why);
  };
  if (dir.empty() || dir[0] != '/' || fs::path(dir).lexically_normal().string() != dir)
    return refuse(dir, "is not a plain absolute path");
  fs::path at = "/";
  struct stat parent {};
  if (::lstat("/", &parent) != 0) return refuse(at, "cannot be looked at");
  for (const fs::path& part : fs::path(dir).relative_path()) {
    if (part.empty()) continue;  // a trailing '/'
    at /= part;
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0) return refuse(at, "cannot be looked at");
    if (S_ISLNK(st.st_mode)) return refuse(at, "is a link");
    if (!S_ISDIR(st.st_mode)) return refuse(at, "is not a directory");
    if (parent.st_uid != 0) return refuse(at, "is in a directory that is not root's");
    // Under a sticky directory only an entry's owner (and root) may rename it.
    const bool othersWrite = (parent.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    if (othersWrite && ((parent.st_mode & S_ISVTX) == 0 || st.st_uid != 0))
      return refuse(at, "is in a directory others than root may write");
    parent = st;
  }
  return Status::Ok();
}

std::vector<std::string> containerArgs(const JobSpec& spec) {
  const ContainerImage& image = *spec.image;
  std::vector<std::string> args = image.entrypoint;
  const auto& rest = spec.command.empty() ? image.cmd : spec.command;
  args.insert(args.end(), rest.begin(), rest.end());
  return args;
}

std::string containerConfig(const JobSpec& spec, const std::vector<std::string>& allotEnv,
                            const ContainerPlaces& places, bool runAsOwner) {
  const ContainerImage& image = *spec.image;
  // The image's environment, then the job's and Allot's (allotEnv holds both, Allot's last).
  std::map<std::string, std::string> env = {{"PATH", kDefaultPath}};
  auto put = [&env](const std::string& entry) {
    auto eq = entry.find('=');
    if (eq != std::string::npos && eq > 0) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  };
  for (const auto& e : image.env) put(e);
  for (const auto& e : allotEnv) {
    // The host's default PATH is not the image's.
    if (e.rfind("PATH=", 0) == 0 && !spec.env.count("PATH")) continue;
    put(e);
  }
  // The driver's directories, after whatever the image says (CUDA images name them already).
  if (!places.driverFiles.empty()) {
    auto append = [&env](const std::string& key, const std::string& dir) {
      std::string& v = env[key];
      if ((":" + v + ":").find(":" + dir + ":") == std::string::npos)
        v = v.empty() ? dir : v + ":" + dir;
    };
    append("LD_LIBRARY_PATH", kDriverLibDir);
    append("PATH", kDriverBinDir);
  }
  json envList = json::array();
  for (const auto& [k, v] : env) envList.push_back(k + "=" + v);

  json user = {{"uid", 0}, {"gid", 0}};
  if (runAsOwner && spec.runAs) {
    user = {{"uid", spec.runAs->uid}, {"gid", spec.runAs->gid}};
    if (spec.runAs->teamGid >= 0) user["additionalGids"] = json::array({spec.runAs->teamGid});
  }
  const json noCapabilities = json::array();
  json process = {{"terminal", false},
                  {"user", user},
                  {"args", containerArgs(spec)},
                  {"env", envList},
                  {"cwd", places.cwd.empty() ? "/" : places.cwd},
                  {"capabilities",
                   {{"bounding", noCapabilities},
                    {"effective", noCapabilities},
                    {"inheritable", noCapabilities},
                    {"permitted", noCapabilities},
                    {"ambient", noCapabilities}}},
                  {"noNewPrivileges", true}};

  json mounts = json::array({
      mount("/proc", "proc", "proc", {"nosuid", "noexec", "nodev"}),
      mount("/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}),
      mount("/dev/pts", "devpts", "devpts",
            {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}),
      mount("/dev/shm", "tmpfs", "shm", {"nosuid", "noexec", "nodev", "mode=1777"}),
      mount("/sys", "sysfs", "sysfs", {"nosuid", "noexec", "nodev", "ro"}),
  });
  for (const auto& dir : places.binds)
    mounts.push_back(mount(dir, "bind", dir, {"rbind", "rw", "nosuid", "nodev"}));
  for (const auto& f : places.driverFiles)
    mounts.push_back(mount(f.container, "bind", f.host, {"bind", "ro", "nosuid", "nodev"}));
  // The host's name resolution, read-only: the container shares the host's network.
  for (const char* file : {"/etc/resolv.conf", "/etc/hosts"}) {
    struct stat st {};
    if (::stat(file, &st) == 0) mounts.push_back(mount(file, "bind", file, {"rbind", "ro"}));
  }

  json devices = json::array();
  if (spec.realGpus) {
    for (int minor : spec.gpuMinors)
      addDevice(devices, image.hostDevDir, "nvidia" + std::to_string(minor));
    for (const char* shared : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"})
      addDevice(devices, image.hostDevDir, shared);
  }

  json linux = {
      {"namespaces", json::array({{{"type", "pid"}}, {{"type", "ipc"}}, {{"type", "mount"}}})},
      {"devices", devices},
      {"maskedPaths",
       {"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
        "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"}},
      {"readonlyPaths",
       {"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}}};
  if (!places.seccomp.empty()) linux["seccomp"] = json::parse(places.seccomp);
  json config = {{"ociVersion", "1.0.2"},
                 {"process", process},
                 {"root", {{"path", "rootfs"}, {"readonly", false}}},
                 {"mounts", mounts},
                 {"linux", linux},
                 {"annotations",
                  {{"org.opencontainers.image.ref.name", image.ref},
                   {"io.allot.image.digest", image.digest},
                   {"io.allot.job", std::to_string(spec.id)}}}};
  // crun loads this program as it is and leaves linux.seccomp (kept: what it was compiled from).
  if (!places.seccompBpf.empty())
    config["annotations"]["run.oci.seccomp_bpf_data"] = places.seccompBpf;
  return config.dump(2) + "\n";
}

std::string hostContainerSeccomp() {
  std::ifstream in(kContainerSeccompProfile);
  return ociSeccomp(std::string((std::istreambuf_iterator<char>(in)), {}));
}

std::string ociSeccomp(const std::string& profileJson) {
#if defined(__x86_64__)
  const std::string arch = "SCMP_ARCH_X86_64", goArch = "amd64";
#elif defined(__aarch64__)
  const std::string arch = "SCMP_ARCH_AARCH64", goArch = "arm64";
#else
  return "";
#endif
  json profile = json::parse(profileJson, nullptr, /*allow_exceptions=*/false);
  if (!profile.is_object() || !profile.contains("defaultAction") || !profile.contains("syscalls") ||
      !profile["syscalls"].is_array())
    return "";
  auto listHas = [](const json& obj, const char* key, const std::string& value) {
    if (!obj.is_object() || !obj.contains(key) || !obj[key].is_array()) return false;
    for (const auto& v : obj[key])
      if (v.is_string() && v.get<std::string>() == value) return true;
    return false;
  };
  auto nonEmpty = [](const json& obj, const char* key) {
    return obj.is_object() && obj.contains(key) && obj[key].is_array() && !obj[key].empty();
  };
  try {
    json out = {{"defaultAction", profile["defaultAction"]}};
    if (profile.contains("defaultErrnoRet")) out["defaultErrnoRet"] = profile["defaultErrnoRet"];
    json architectures = json::array({arch});
    for (const auto& m : profile.value("archMap", json::array())) {
      if (m.value("architecture", "") == arch)
        for (const auto& sub : m.value("subArchitectures", json::array()))
          architectures.push_back(sub);
    }
    out["architectures"] = architectures;
    json syscalls = json::array();
    for (const auto& rule : profile["syscalls"]) {
      const json includes = rule.value("includes", json::object());
      const json excludes = rule.value("excludes", json::object());
      // The container holds no capability: a rule for holders of one is not its.
      if (nonEmpty(includes, "caps")) continue;
      if (nonEmpty(includes, "arches") && !listHas(includes, "arches", goArch)) continue;
      if (listHas(excludes, "arches", goArch)) continue;
      json r = {{"names", rule.at("names")}, {"action", rule.at("action")}};
      if (rule.contains("errnoRet")) r["errnoRet"] = rule["errnoRet"];
      if (rule.contains("args") && rule["args"].is_array() && !rule["args"].empty())
        r["args"] = rule["args"];
      syscalls.push_back(std::move(r));
    }
    out["syscalls"] = syscalls;
    return out.dump();
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace allot::agent
