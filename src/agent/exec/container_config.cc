#include "agent/exec/container_config.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <map>
#include <nlohmann/json.hpp>

namespace allot::agent {
namespace {

using nlohmann::json;

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
  json config = {{"ociVersion", "1.0.2"},
                 {"process", process},
                 {"root", {{"path", "rootfs"}, {"readonly", false}}},
                 {"mounts", mounts},
                 {"linux", linux},
                 {"annotations",
                  {{"org.opencontainers.image.ref.name", image.ref},
                   {"io.allot.image.digest", image.digest},
                   {"io.allot.job", std::to_string(spec.id)}}}};
  return config.dump(2) + "\n";
}

}  // namespace allot::agent
