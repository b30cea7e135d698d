#include "agent/exec/job_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "agent/exec/remove_tree.h"

namespace allot::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Status ioError(const std::string& what, const std::string& path, int err) {
  return Status::Unavailable("failed to " + what + " " + path + ": " + std::strerror(err));
}

// The whole file; nullopt when it cannot be opened (errno says why) or read. Plain system calls:
// the agent reads a job's pid and outcome files as each job starts and ends.
std::optional<std::string> slurp(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      errno = err;
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// mkdir, making the parents first when they are missing (the first job of a new work dir): 0, or
// the errno of the failure.
int makeDir(const std::string& dir, mode_t mode) {
  if (::mkdir(dir.c_str(), mode) == 0) return 0;
  if (errno != ENOENT) return errno;
  std::error_code ec;
  fs::create_directories(fs::path(dir).parent_path(), ec);
  if (ec) return ec.value();
  return ::mkdir(dir.c_str(), mode) == 0 ? 0 : errno;
}

// makeDir, replacing whatever is there already (a directory of this id an earlier agent left
// behind) with an empty one.
Status makeFreshDir(const std::string& dir, mode_t mode) {
  int err = makeDir(dir, mode);
  if (err == EEXIST) {
    if (int removeErr = removeTree(dir); removeErr != 0) return ioError("remove", dir, removeErr);
    err = makeDir(dir, mode);
  }
  return err == 0 ? Status::Ok() : ioError("create", dir, err);
}

// Parses JSON read from path without letting nlohmann's exceptions out of the module.
template <typename T, typename F>
Result<T> parseJson(const std::string& path, const std::string& text, F&& f) {
  try {
    return f(json::parse(text));
  } catch (const std::exception& e) {
    return Status::Internal("unreadable " + path + ": " + e.what());
  }
}

template <typename T, typename F>
Result<T> fromJsonFile(const std::string& path, F&& f) {
  auto text = slurp(path);
  if (!text) return Status::NotFound("no " + path);
  return parseJson<T>(path, *text, std::forward<F>(f));
}

}  // namespace

JobDir::JobDir(const std::string& stateDir, const std::string& workDir, int64_t id)
    : path_(stateDir + "/jobs/" + std::to_string(id)),
      dataPath_(workDir + "/jobs/" + std::to_string(id)) {}

Status JobDir::create() const {
  // mkdir, not create_directories: its stat of every level was a tenth of the agent's work for a
  // short job.
  ALLOT_RETURN_IF_ERROR(makeFreshDir(dataPath_, 0755));
  if (int err = makeDir(workPath(), 0755); err != 0) return ioError("create", workPath(), err);
  if (split()) {
    // The agent's records (the job's environment among them) are nobody else's to read; the
    // chmod whatever the umask took away.
    ALLOT_RETURN_IF_ERROR(makeFreshDir(path_, 0700));
    ::chmod(path_.c_str(), 0700);
  }
  // The job's output is its owner's business (ProcessExecutor::giveToOwner hands it over).
  int fd = ::open(logPath().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ioError("create", logPath(), errno);
  ::close(fd);
  return Status::Ok();
}

Status JobDir::remove(TreeRemover& remover, bool* setAside) const {
  // The records are the agent's own, a few files, removed at once: data set aside with them would
  // still read as a job's to whoever lists the directories (the Jupyter fork server does).
  if (split()) {
    if (int err = removeTree(path_); err != 0) return ioError("remove", path_, err);
  } else {
    for (const char* record : {"spec.json", "shim.json", "pid", "status.json"}) {
      const std::string file = path_ + "/" + record;
      if (::unlink(file.c_str()) != 0 && errno != ENOENT) return ioError("remove", file, errno);
    }
  }
  const TreeRemover::Removal data = remover.remove(dataPath_);
  if (setAside != nullptr) *setAside = data.setAside;
  return data.error == 0 ? Status::Ok() : ioError("remove", dataPath_, data.error);
}

Status JobDir::writeFile(const std::string& name, const std::string& content) const {
  std::string final = path_ + "/" + name;
  std::string tmp = final + ".tmp";
  // The agent's alone: spec.json holds the job's environment.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ioError("create", tmp, errno);
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return ioError("write", tmp, err);
    }
    done += static_cast<size_t>(n);
  }
  // Renamed into place, so a reader never sees part of a file. No fsync: these files only have
  // to outlive the agent process (a restarted agent reads them back from the page cache), not
  // the host, whose crash kills the jobs they describe too. An fsync here sat on every job start
  // and cost up to tens of ms on a busy disk.
  ::close(fd);
  if (::rename(tmp.c_str(), final.c_str()) != 0) return ioError("rename", tmp, errno);
  return Status::Ok();
}

Status JobDir::writeRecord(const JobRecord& r) const {
  const JobSpec& s = r.spec;
  json j = {{"id", s.id},
            {"command", s.command},
            {"env", s.env},
            {"gpu_uuids", s.gpuUuids},
            {"gpu_indices", s.gpuIndices},
            {"gpu_minors", s.gpuMinors},
            {"real_gpus", s.realGpus},
            {"memory_limit_mib", s.memoryLimitMib},
            {"cpu_millis", s.cpuMillis},
            {"started_at", r.startedAt},
            {"cgroups", r.cgroups},
            {"session", s.session}};
  if (s.runAs) j["run_as"] = model::toJson(*s.runAs);
  // Which image's layers the container mounts: the image store keeps them while it runs, across
  // an agent's restart too.
  if (s.image)
    j["image"] = {{"ref", s.image->ref}, {"digest", s.image->digest}, {"layers", s.image->layers}};
  return writeFile("spec.json", j.dump(2) + "\n");
}

Result<JobRecord> JobDir::readRecord() const {
  return fromJsonFile<JobRecord>(path_ + "/spec.json", [](const json& j) {
    JobRecord r;
    JobSpec& s = r.spec;
    s.id = j.at("id").get<int64_t>();
    s.command = j.at("command").get<std::vector<std::string>>();
    s.env = j.at("env").get<std::map<std::string, std::string>>();
    s.gpuUuids = j.at("gpu_uuids").get<std::vector<std::string>>();
    s.gpuIndices = j.at("gpu_indices").get<std::vector<int>>();
    s.gpuMinors = j.at("gpu_minors").get<std::vector<int>>();
    s.realGpus = j.at("real_gpus").get<bool>();
    s.memoryLimitMib = j.at("memory_limit_mib").get<int64_t>();
    s.cpuMillis = j.at("cpu_millis").get<int>();
    r.startedAt = j.at("started_at").get<TimeMs>();
    r.cgroups = j.at("cgroups").get<std::vector<std::string>>();
    s.session = j.value("session", false);  // absent in records of agents before it
    if (j.contains("run_as")) {
      auto runAs = model::runAsFromJson(j.at("run_as"));
      if (!runAs.ok()) throw std::runtime_error(runAs.status().message());
      s.runAs = *runAs;
    }
    if (j.contains("image")) {
      const json& image = j.at("image");
      ContainerImage c;
      c.ref = image.at("ref").get<std::string>();
      c.digest = image.at("digest").get<std::string>();
      c.layers = image.at("layers").get<std::vector<std::string>>();
      s.image = std::move(c);
    }
    return r;
  });
}

Status JobDir::writeShim(const ShimRecord& s) const {
  json j = {{"pid", s.pid}, {"start_ticks", s.startTicks}};
  return writeFile("shim.json", j.dump() + "\n");
}

std::optional<ShimRecord> JobDir::readShim() const {
  auto r = fromJsonFile<ShimRecord>(path_ + "/shim.json", [](const json& j) {
    return ShimRecord{j.at("pid").get<pid_t>(), j.at("start_ticks").get<uint64_t>()};
  });
  if (!r.ok()) return std::nullopt;
  return *r;
}

std::optional<ShimRecord> JobDir::readJobPid() const {
  auto text = slurp(pidPath());
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  ShimRecord r;
  if (!(in >> r.pid >> r.startTicks) || r.pid <= 0) return std::nullopt;
  return r;
}

Status JobDir::writeOutcome(const JobOutcome& o) const {
  json j = {{"state", model::actualStateName(o.state)}, {"finished_at", o.finishedAt}};
  if (o.exitCode) j["exit_code"] = *o.exitCode;
  if (o.signal) j["signal"] = *o.signal;
  if (!o.message.empty()) j["message"] = o.message;
  return writeFile("status.json", j.dump() + "\n");
}

Result<std::optional<JobOutcome>> JobDir::readOutcome() const {
  // Not there (ENOENT): no outcome yet; a job whose shim has exited without one is lost
  // (ProcessExecutor::refresh). Not to be read now (out of descriptors or memory, EMFILE,
  // ENOMEM): Unavailable, and the next poll looks again; taken for "none", a job that had ended
  // was reported lost, its exit code thrown away, and perhaps run again.
  auto text = slurp(statusPath());
  if (!text) {
    const int err = errno;
    if (err == ENOENT) return std::optional<JobOutcome>();
    const bool forNow = err == EMFILE || err == ENFILE || err == ENOMEM || err == EAGAIN;
    const std::string why = "cannot read " + statusPath() + ": " + std::strerror(err);
    return forNow ? Status::Unavailable(why) : Status::Internal(why);
  }
  auto r = parseJson<JobOutcome>(statusPath(), *text, [](const json& j) {
    JobOutcome o;
    std::string state = j.at("state").get<std::string>();
    if (state == "exited") {
      o.state = model::ActualState::kExited;
    } else if (state == "failed_to_start") {
      o.state = model::ActualState::kFailedToStart;
    } else {
      throw std::runtime_error("unknown state '" + state + "'");
    }
    if (j.contains("exit_code")) o.exitCode = j["exit_code"].get<int>();
    if (j.contains("signal")) o.signal = j["signal"].get<int>();
    o.finishedAt = j.value("finished_at", TimeMs{0});
    o.message = j.value("message", "");
    return o;
  });
  if (!r.ok()) return r.status();
  return std::optional<JobOutcome>(*r);
}

}  // namespace allot::agent
