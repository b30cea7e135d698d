#include "agent/exec/process_executor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <set>

#include "agent/exec/container_config.h"
#include "agent/exec/proc.h"
#include "agent/exec/remove_tree.h"
#include "agent/exec/run_as.h"
#include "agent/exec/seccomp_bpf.h"
#include "common/log.h"

namespace allot::agent {
namespace {

namespace fs = std::filesystem;
using model::ActualState;

// The job's PATH unless it brings its own: the agent's environment is not the job's business.
constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
// The descriptor on which the shim reports (by closing it) that the command was exec'd.
constexpr int kReportFd = 3;

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

std::vector<std::string> jobEnvironment(const JobSpec& spec, const JobPlaces& places) {
  std::map<std::string, std::string> env = {{"PATH", kDefaultPath}};
  // A workload needs no passwd entry: its home is its own working directory (the only place it
  // surely may write), unless the job says otherwise.
  if (spec.runAs) env["HOME"] = places.work;
  for (const auto& [k, v] : spec.env) env[k] = v;
  if (spec.runAs) {
    env["USER"] = spec.runAs->user;
    env["LOGNAME"] = spec.runAs->user;
  }
  if (!places.teamDir.empty()) env["ALLOT_TEAM_DIR"] = places.teamDir;
  const std::string& scratch = places.scratch;
  // Set last so that a job cannot widen its own GPUs. "void" is what NVIDIA's container runtime
  // takes to mean "no GPUs"; CUDA takes the empty string the same way.
  std::string gpus = join(spec.gpuUuids, ",");
  env["CUDA_VISIBLE_DEVICES"] = gpus;
  env["NVIDIA_VISIBLE_DEVICES"] = gpus.empty() ? "void" : gpus;
  env["ALLOT_JOB_ID"] = std::to_string(spec.id);
  // Per-workload scratch that the wipe between tenants removes (agent/host_ops/wipe.h).
  env["ALLOT_SCRATCH"] = scratch;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// Blocks until the other end of every fd is closed, or timeoutMs passes.
void waitForAllClosed(std::vector<int> fds, int64_t timeoutMs) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  char buf[64];
  std::vector<pollfd> open;
  for (int fd : fds) open.push_back({fd, POLLIN, 0});
  while (!open.empty()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return;
    int r = ::poll(open.data(), open.size(), static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return;
    std::erase_if(open, [&buf](pollfd& p) {
      if (p.revents == 0) return false;
      p.revents = 0;
      ssize_t n = ::read(p.fd, buf, sizeof buf);
      return n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN);
    });
  }
}

// The shim's half of the protocol is in job_shim_main.cc: a u32 length, then "<n>\0" and n
// NUL-terminated arguments, then "<m>\0" and m environment entries. A string is cut at its first
// NUL, as execve would cut it on the direct path.
std::string jobMessage(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  std::string payload;
  auto put = [&payload](const std::vector<std::string>& strings) {
    payload += std::to_string(strings.size());
    payload += '\0';
    for (const auto& s : strings) {
      payload += s.c_str();
      payload += '\0';
    }
  };
  put(args);
  put(env);
  uint32_t size = static_cast<uint32_t>(payload.size());
  return std::string(reinterpret_cast<const char*>(&size), sizeof size) + payload;
}

Status sendAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    // MSG_NOSIGNAL: a standby that died must not take the agent with it (SIGPIPE).
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Unavailable(std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

bool isNumber(const std::string& s) {
  return !s.empty() && s.size() < 19 && s.find_first_not_of("0123456789") == std::string::npos;
}

// A file of the agent's alone, through a descriptor opened close-on-exec: the bundle's
// config.json holds the job's environment, and a std::ofstream's descriptor would pass to a
// process another thread spawns meanwhile (the image puller's).
Status writeAgentFile(const std::string& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Unavailable("cannot write " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Status::Unavailable("cannot write " + path + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::Ok();
}

}  // namespace

ProcessExecutor::ProcessExecutor(std::string workDir, std::string shimPath, const Clock& clock,
                                 CgroupManager* cgroups, int standbys, std::string stateDir)
    : workDir_(std::move(workDir)),
      stateDir_(stateDir.empty() ? workDir_ : std::move(stateDir)),
      scratchRoot_(workDir_ + "/scratch"),
      shimPath_(std::move(shimPath)),
      clock_(clock),
      cgroups_(cgroups),
      shimServer_(std::make_unique<ShimServer>(shimPath_, clock, cgroupBases())),
      // Without groups to join a standby would save only the spawn; not worth a process.
      standbyTarget_(cgroups != nullptr && cgroups->mode() != "none" ? std::max(0, standbys) : 0) {
  // What an agent before this one set aside and did not finish removing.
  remover_.sweep(workDir_ + "/jobs");
  remover_.sweep(scratchRoot_);
  adoptAll();
  if (cgroups_ != nullptr) {
    for (const auto& [id, job] : jobs_) cgroups_->skipSlotsOf(job.cgroups);
  }
  removeStrayCgroups();
}

ProcessExecutor::~ProcessExecutor() {
  // Nothing left behind on a clean stop. (After a crash each standby sees its socket close and
  // exits; the next executor removes its groups.)
  for (Standby& s : standbys_) {
    ::close(s.socket);
    if (sameLiveProcess(s.shim.pid, s.shim.startTicks)) ::kill(s.shim.pid, SIGKILL);
    int status;
    while (::waitpid(s.shim.pid, &status, 0) < 0 && errno == EINTR) {
    }
    (void)CgroupManager::remove(s.cgroups);
  }
}

void ProcessExecutor::setScratchRoot(std::string root) {
  scratchRoot_ = std::move(root);
  remover_.sweep(scratchRoot_);
}

void ProcessExecutor::setShimServer(bool enabled) {
  if (!enabled) {
    shimServer_.reset();
  } else if (!shimServer_) {
    shimServer_ = std::make_unique<ShimServer>(shimPath_, clock_, cgroupBases());
  }
}

void ProcessExecutor::adoptAll() {
  std::set<int64_t> seen;
  adoptFrom(stateDir_, seen);
  if (stateDir_ != workDir_) {
    // Records an agent without a state dir left in the work dir (an upgrade): adopted there.
    adoptFrom(workDir_, seen);
    removeOrphanedData(seen);
  }
}

void ProcessExecutor::adoptFrom(const std::string& root, std::set<int64_t>& seen) {
  std::error_code ec;
  fs::directory_iterator it(root + "/jobs", ec);
  if (ec) return;  // no jobs yet
  for (const auto& entry : it) {
    std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !isNumber(name)) continue;
    int64_t id = std::stoll(name);
    if (seen.count(id)) continue;
    // In the work dir, only a directory with records is a job to adopt: the rest is data.
    if (root != stateDir_ && !fs::exists(entry.path() / "spec.json", ec)) continue;
    Job job{JobDir(root, workDir_, id)};
    seen.insert(id);
    auto record = job.dir.readRecord();
    if (!record.ok()) {
      // The agent stopped before it wrote the spec, so before it started anything.
      spdlog::warn("removing incomplete job directory {}: {}", job.dir.path(),
                   record.status().message());
      (void)job.dir.remove(remover_);
      continue;
    }
    job.actual.id = id;
    job.actual.state = ActualState::kRunning;
    job.actual.startedAt = record->startedAt;
    job.cgroups = record->cgroups;
    job.gpuIndices = record->spec.gpuIndices;
    if (record->spec.image) {
      job.imageRef = record->spec.image->ref;
      job.imageLayers = record->spec.image->layers;
    }
    job.shim = job.dir.readShim();
    refresh(job);
    spdlog::info("re-adopted job={} state={}", id, model::actualStateName(job.actual.state));
    jobs_.emplace(id, std::move(job));
  }
}

Executor::ImagesInUse ProcessExecutor::imagesInUse() const {
  ImagesInUse out;
  for (const auto& [id, job] : jobs_) {
    if (job.imageRef.empty() || job.actual.state != ActualState::kRunning) continue;
    out.refs.insert(job.imageRef);
    out.layers.insert(job.imageLayers.begin(), job.imageLayers.end());
  }
  return out;
}

void ProcessExecutor::removeOrphanedData(const std::set<int64_t>& known) {
  std::error_code ec;
  fs::directory_iterator it(workDir_ + "/jobs", ec);
  if (ec) return;
  std::vector<fs::path> orphans;
  for (const auto& entry : it) {
    std::string name = entry.path().filename().string();
    if (entry.is_directory() && isNumber(name) && !known.count(std::stoll(name)))
      orphans.push_back(entry.path());
  }
  if (!orphans.empty())
    spdlog::warn("removing {} job directories with no records (their jobs ended with the host)",
                 orphans.size());
  for (const auto& p : orphans) {
    if (int err = remover_.remove(p.string()).error; err != 0)
      spdlog::warn("cannot remove {}: {}", p.string(), std::strerror(err));
  }
}

void ProcessExecutor::removeStrayCgroups() {
  if (cgroups_ == nullptr) return;
  std::set<int64_t> known;
  std::set<std::string> held;  // a job started on a standby holds slot-<n> groups
  for (const auto& [id, job] : jobs_) {
    known.insert(id);
    held.insert(job.cgroups.begin(), job.cgroups.end());
  }
  std::vector<std::string> stray = cgroups_->strayGroups(known, held);
  if (stray.empty()) return;
  spdlog::warn("removing {} cgroups of jobs or standby shims this agent no longer knows",
               stray.size());
  // Whatever still runs there belongs to no job anyone tracks, and may hold GPUs.
  CgroupManager::killAll(stray);
  if (!CgroupManager::remove(stray)) cgroupsToRemove_.push_back(stray);
}

model::ActualJob ProcessExecutor::start(const JobSpec& spec) { return startAll({spec}).front(); }

std::vector<model::ActualJob> ProcessExecutor::startAll(const std::vector<JobSpec>& specs) {
  // Every job's shim is set going first, then all are waited for together: a host's jobs start
  // side by side, each in about the time of one, not one after another.
  std::vector<std::pair<int64_t, int>> reports;  // job id, the end its shim closes once exec'd
  for (const JobSpec& spec : specs) {
    if (jobs_.count(spec.id)) continue;  // known: its state, starting nothing
    reports.emplace_back(spec.id, begin(spec));
  }
  std::vector<int> fds;
  for (const auto& r : reports) {
    if (r.second >= 0) fds.push_back(r.second);
  }
  waitForAllClosed(fds, kStartTimeoutMs);
  for (int fd : fds) ::close(fd);
  std::vector<model::ActualJob> out;
  for (const JobSpec& spec : specs) {
    Job& job = jobs_.at(spec.id);
    refresh(job);
    out.push_back(job.actual);
  }
  return out;
}

int ProcessExecutor::begin(const JobSpec& spec) {
  Job& job = jobs_.emplace(spec.id, Job{JobDir(stateDir_, workDir_, spec.id)}).first->second;
  job.actual.id = spec.id;
  job.actual.state = ActualState::kRunning;
  job.actual.startedAt = clock_.nowMs();
  job.gpuIndices = spec.gpuIndices;
  if (spec.image) {
    job.imageRef = spec.image->ref;
    job.imageLayers = spec.image->layers;
  }

  if (Status st = job.dir.create(); !st.ok()) return failToStart(job, spec, st.message());
  if (spec.image ? containerArgs(spec).empty() : spec.command.empty() || spec.command[0].empty()) {
    return failToStart(job, spec,
                       spec.image
                           ? "the image " + spec.image->ref +
                                 " names no command (entrypoint or cmd) and the job gives none"
                           : "empty command");
  }
  const std::string scratch = scratchPath(spec.id);
  std::error_code scratchError;
  if (::access(scratchRoot_.c_str(), F_OK) != 0) fs::create_directories(scratchRoot_, scratchError);
  if (runAsOwner_ && !scratchError) {
    // Root gives the directory to the owner below: nobody else may have had a hand in its path.
    if (Status st = checkAgentOwnedDir(scratchRoot_, "the scratch root"); !st.ok())
      return failToStart(job, spec, st.message());
  }
  // Made empty: whatever an earlier agent left under this id (a crash, a reset of job ids) may
  // be another user's, and is removed first, a link or a file in its place too.
  if (!scratchError && ::mkdir(scratch.c_str(), 0755) != 0) {
    if (errno == EEXIST) {
      if (int err = remover_.remove(scratch).error; err != 0)
        scratchError = std::error_code(err, std::generic_category());
      else if (::mkdir(scratch.c_str(), 0755) != 0)
        scratchError = std::error_code(errno, std::generic_category());
    } else {
      scratchError = std::error_code(errno, std::generic_category());
    }
  }
  if (scratchError) {
    return failToStart(
        job, spec, "cannot create scratch directory " + scratch + ": " + scratchError.message());
  }
  JobPlaces places{scratch, job.dir.workPath(), ""};
  if (runAsOwner_) {
    if (Status st = checkRunAs(spec); !st.ok()) return failToStart(job, spec, st.message());
    if (Status st = giveToOwner(job, spec, scratch); !st.ok())
      return failToStart(job, spec, st.message());
  }
  if (!teamRoot_.empty() && spec.runAs && !spec.runAs->team.empty()) {
    auto dir = ensureTeamDir(teamRoot_, *spec.runAs, runAsOwner_);
    if (!dir.ok()) return failToStart(job, spec, dir.status().message());
    places.teamDir = *dir;
  }
  std::vector<std::string> env = jobEnvironment(spec, places);
  std::vector<std::string> args = {shimPath_,         "--job-dir", job.dir.path(),    "--log",
                                   job.dir.logPath(), "--cwd",     job.dir.workPath()};
  std::vector<std::string> command = spec.command;
  if (spec.image) {
    // crun runs the job in the image; the identity, working directory and environment are in
    // the bundle's config.json, and the shim gives crun a fixed environment of its own.
    auto bundle = writeBundle(job, spec, env, places);
    if (!bundle.ok()) return failToStart(job, spec, bundle.status().message());
    args.insert(args.end(), bundle->shimArgs.begin(), bundle->shimArgs.end());
    command = std::move(bundle->crun);
    env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  } else {
    if (!spec.workdir.empty()) {
      args.push_back("--workdir");
      args.push_back(spec.workdir);
    }
    if (runAsOwner_) {
      auto identity = shimIdentityArgs(*spec.runAs);
      args.insert(args.end(), identity.begin(), identity.end());
    }
  }

  int report = -1;  // closed by the shim once the command was exec'd
  if (std::optional<Standby> standby = takeStandby()) {
    std::vector<std::string> jobArgs = args;
    jobArgs.push_back("--");
    jobArgs.insert(jobArgs.end(), command.begin(), command.end());
    // The limits go in before the shim hears of the job: nothing of the job's runs unconfined.
    if (Status st = cgroups_->applyLimits(standby->cgroups, spec); !st.ok()) {
      spdlog::warn("job={}: cannot use standby shim {} ({}); starting a shim of its own", spec.id,
                   standby->shim.pid, st.message());
      retireStandby(*standby);
    } else {
      job.cgroups = standby->cgroups;
      if (Status st = job.dir.writeRecord({spec, job.actual.startedAt, job.cgroups}); !st.ok()) {
        job.cgroups.clear();  // the standby's, which retiring it releases
        retireStandby(*standby);
        return failToStart(job, spec, st.message());
      }
      if (handOver(job, *standby, jobArgs, env)) {
        report = standby->socket;
      } else {
        job.cgroups.clear();
        job.shim.reset();
        job.shimIsChild = false;
      }
    }
  }

  if (report < 0) {
    if (Status st = confineAndRecord(job, spec); !st.ok()) {
      return failToStart(job, spec, st.message());
    }
    for (const auto& g : job.cgroups) {
      args.push_back("--cgroup");
      args.push_back(g);
    }
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    // The shim runs as root: it gets no environment, and the job (command and environment) as
    // data on the socket, which it applies only in the child once that has dropped to the owner.
    auto shim = spawnShim({"--job-fd", std::to_string(kReportFd)});
    if (!shim.ok()) return failToStart(job, spec, shim.status().message());
    const int socket = shim->socket;
    job.shim = shim->record;
    job.shimIsChild = true;
    if (Status st = job.dir.writeShim(*job.shim); !st.ok()) {
      spdlog::warn("job={} cannot record its shim; a restarted agent will report it lost: {}",
                   spec.id, st.message());
    }
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (Status st = sendAll(socket, jobMessage(rest, env)); !st.ok()) {
      // Without the whole job it runs nothing and exits at end-of-file; refresh() reports it.
      spdlog::warn("job={}: its shim {} did not take the job: {}", spec.id, job.shim->pid,
                   st.message());
      ::close(socket);
      return -1;
    }
    report = socket;
  }
  return report;
}

Result<ProcessExecutor::Bundle> ProcessExecutor::writeBundle(const Job& job, const JobSpec& spec,
                                                             const std::vector<std::string>& env,
                                                             const JobPlaces& places) {
  const ContainerImage& image = *spec.image;
  if (seccomp_.empty())
    return Status::FailedPrecondition(
        std::string("jobs in images need a seccomp filter and this agent has none (it reads ") +
        kContainerSeccompProfile + ", from containers-common)");
  const std::string bundle = job.dir.dataPath() + "/bundle";
  const std::string overlay = job.dir.dataPath() + "/overlay";
  // The overlay's options are one page, split at ',' and ':' (layers are named relative to the
  // layers root, see job_shim_main.cc).
  size_t optionBytes = overlay.size() * 2 + 64;
  for (const auto& layer : image.layers) optionBytes += layer.size() + 1;
  for (const std::string* path : {&image.layersRoot, &overlay}) {
    if (path->find_first_of(",:\\") != std::string::npos)
      return Status::InvalidArgument("cannot mount an image under " + *path +
                                     ": the path holds ',', ':' or '\\'");
  }
  if (optionBytes > 4000)
    return Status::InvalidArgument("the image " + image.ref + " has too many layers (" +
                                   std::to_string(image.layers.size()) + ") to mount");
  std::error_code ec;
  for (const std::string& dir : {bundle + "/rootfs", overlay + "/upper", overlay + "/work"}) {
    fs::create_directories(dir, ec);
    if (ec) return Status::Unavailable("cannot create " + dir + ": " + ec.message());
  }
  // Root's alone: the job's environment is in config.json, and what the container writes (the
  // upper directory) must not be reachable from the host by anyone else, nor by its owner
  // outside the container.
  ::chmod(bundle.c_str(), 0700);
  ::chmod(overlay.c_str(), 0700);
  ContainerPlaces inside;
  inside.binds = {places.scratch, places.work};
  if (!places.teamDir.empty()) inside.binds.push_back(places.teamDir);
  for (const auto& dir : spec.binds) {
    if (std::find(inside.binds.begin(), inside.binds.end(), dir) != inside.binds.end()) continue;
    ALLOT_RETURN_IF_ERROR(checkBindSource(dir));
    inside.binds.push_back(dir);
  }
  if (spec.realGpus) inside.driverFiles = driverFiles_;
  inside.seccomp = seccomp_;
  inside.seccompBpf = seccompBpf_;
  // The image's working directory only when it is an absolute path.
  const bool imageCwd = !image.workingDir.empty() && image.workingDir[0] == '/';
  inside.cwd = !spec.workdir.empty() ? spec.workdir : imageCwd ? image.workingDir : places.work;
  ALLOT_RETURN_IF_ERROR(
      writeAgentFile(bundle + "/config.json", containerConfig(spec, env, inside, runAsOwner_)));
  Bundle b;
  b.shimArgs = {"--container-rootfs", bundle + "/rootfs", "--layers-root",
                image.layersRoot,     "--upper",          overlay + "/upper",
                "--overlay-work",     overlay + "/work"};
  for (const std::string& layer : image.layers) {
    b.shimArgs.push_back("--lower");
    b.shimArgs.push_back(layer);
  }
  b.crun = {image.crun,
            "--root",
            stateDir_ + "/crun",
            "--cgroup-manager=disabled",
            "run",
            "--bundle",
            bundle,
            "allot-job-" + std::to_string(spec.id)};
  return b;
}

void ProcessExecutor::setSeccomp(std::string seccomp) {
  seccomp_ = std::move(seccomp);
  seccompBpf_.clear();
  if (seccomp_.empty()) return;
  auto compiled = compileSeccomp(seccomp_);
  if (compiled.ok()) {
    seccompBpf_ = std::move(*compiled);
  } else {
    spdlog::warn("the seccomp filter for containers is compiled by crun at every start: {}",
                 compiled.status().message());
  }
}

Status ProcessExecutor::giveToOwner(const Job& job, const JobSpec& spec,
                                    const std::string& scratch) {
  const model::RunAs& r = *spec.runAs;
  // The job directory holds the agent's files (spec, status, log): root's, passable by the
  // owner's group only. Its working directory and scratch are the owner's alone, and so is its
  // log: others who share the owner's group (a directory's `users`, gid 100) read none of it, and
  // the owner's disk quota counts what the job writes there.
  ALLOT_RETURN_IF_ERROR(giveDirectoryTo(job.dir.dataPath(), 0, r.gid, 0710));
  ALLOT_RETURN_IF_ERROR(giveTo(job.dir.logPath(), r.uid, r.gid, 0600));
  ALLOT_RETURN_IF_ERROR(giveDirectoryTo(job.dir.workPath(), r.uid, r.gid, 0700));
  ALLOT_RETURN_IF_ERROR(giveDirectoryTo(scratch, r.uid, r.gid, 0700));
  // Each user must pass through the roots to reach their own, and list nothing there.
  for (const std::string& root : {workDir_, workDir_ + "/jobs", scratchRoot_})
    ::chmod(root.c_str(), 0711);
  return Status::Ok();
}

Status ProcessExecutor::confineAndRecord(Job& job, const JobSpec& spec) {
  if (cgroups_ != nullptr) {
    auto groups = cgroups_->create(spec);
    if (!groups.ok()) {
      return Status::Unavailable("failed to confine the job: " + groups.status().message());
    }
    job.cgroups = *groups;
  }
  return job.dir.writeRecord({spec, job.actual.startedAt, job.cgroups});
}

bool ProcessExecutor::handOver(Job& job, Standby& standby, const std::vector<std::string>& args,
                               const std::vector<std::string>& env) {
  // Recorded before the shim can act on the job, as on the direct path.
  job.shim = standby.shim;
  job.shimIsChild = true;
  if (Status st = job.dir.writeShim(*job.shim); !st.ok()) {
    spdlog::warn("job={} cannot record its shim; a restarted agent will report it lost: {}",
                 job.actual.id, st.message());
  }
  // argv[0] stays the standby's own.
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (Status st = sendAll(standby.socket, jobMessage(rest, env)); !st.ok()) {
    spdlog::warn("job={}: standby shim {} cannot take it ({}); starting a shim of its own",
                 job.actual.id, standby.shim.pid, st.message());
    retireStandby(standby);
    return false;
  }
  return true;
}

Result<ProcessExecutor::SpawnedShim> ProcessExecutor::spawnShim(
    const std::vector<std::string>& args) {
  // A pair per try: a server that failed may have forked a shim holding the first pair's end,
  // which must never be able to read a job meant for the shim spawned instead.
  auto pair = [](int ends[2]) -> Status {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
      return Status::Unavailable(std::string("cannot create a socket pair: ") +
                                 std::strerror(errno));
    }
    // Bounds start() should the shim stop reading with the job half sent.
    timeval timeout = {kStartTimeoutMs / 1000, 0};
    ::setsockopt(ends[0], SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    return Status::Ok();
  };
  int ends[2];
  if (Status st = pair(ends); !st.ok()) return st;
  Result<pid_t> pid = Status::Unavailable("no shim server");
  if (shimServer_) {
    pid = shimServer_->fork(args, ends[1]);
    if (!pid.ok()) {
      ::close(ends[0]);
      ::close(ends[1]);
      if (Status st = pair(ends); !st.ok()) return st;
    }
  }
  if (!pid.ok()) {
    std::vector<std::string> argv = {shimPath_};
    argv.insert(argv.end(), args.begin(), args.end());
    pid = spawnShimProcess(argv, ends[1], kReportFd);
  }
  ::close(ends[1]);
  if (!pid.ok()) {
    ::close(ends[0]);
    return pid.status();
  }
  auto stat = readProcStat(*pid);  // still there: only we can reap it
  return SpawnedShim{ShimRecord{*pid, stat ? stat->startTicks : 0}, ends[0]};
}

Result<ProcessExecutor::Standby> ProcessExecutor::spawnStandby() {
  auto groups = cgroups_->createSpare();
  if (!groups.ok()) return groups.status();
  std::vector<std::string> args = {"--standby-fd", std::to_string(kReportFd)};
  for (const auto& g : *groups) {
    args.push_back("--cgroup");
    args.push_back(g);
  }
  // The job, with its environment, comes on the socket.
  auto shim = spawnShim(args);
  if (!shim.ok()) {
    CgroupManager::remove(*groups);
    return shim.status();
  }
  return Standby{shim->record, *groups, shim->socket, false};
}

bool ProcessExecutor::standbyAlive(Standby& s) {
  char buf[16];
  for (;;) {
    ssize_t n = ::recv(s.socket, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      s.ready = true;  // it sends nothing but 'R'
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // End of file: the shim, the only other holder of the socket, has exited.
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

void ProcessExecutor::replenishStandbys() {
  std::erase_if(standbys_, [this](Standby& s) {
    if (standbyAlive(s)) return false;
    spdlog::warn(
        "standby allot-job-shim (pid {}) exited before it got a job (see its stderr); "
        "jobs start without a standby for {} s",
        s.shim.pid, kStandbyRetryMs / 1000);
    retireStandby(s);
    standbyRetryAt_ = clock_.nowMs() + kStandbyRetryMs;
    return true;
  });
  while (static_cast<int>(standbys_.size()) < standbyTarget_ && clock_.nowMs() >= standbyRetryAt_) {
    auto standby = spawnStandby();
    if (!standby.ok()) {
      spdlog::warn("cannot prepare a standby allot-job-shim; jobs start without one for {} s: {}",
                   kStandbyRetryMs / 1000, standby.status().message());
      standbyRetryAt_ = clock_.nowMs() + kStandbyRetryMs;
      return;
    }
    standbys_.push_back(std::move(*standby));
  }
}

std::optional<ProcessExecutor::Standby> ProcessExecutor::takeStandby() {
  for (auto it = standbys_.begin(); it != standbys_.end(); ++it) {
    // Readiness as of now: poll() may not have seen the 'R' yet. A dead one is left to poll().
    if (standbyAlive(*it) && it->ready) {
      Standby s = std::move(*it);
      standbys_.erase(it);
      return s;
    }
  }
  // A standby still joining its groups is not waited for: a shim of the job's own joins in the
  // same kernel grace period or right after it (when joining is cheap), so it is about as quick.
  return std::nullopt;
}

void ProcessExecutor::retireStandby(Standby& s) {
  ::close(s.socket);
  s.socket = -1;
  if (sameLiveProcess(s.shim.pid, s.shim.startTicks)) ::kill(s.shim.pid, SIGKILL);
  shimsToReap_.push_back(s.shim);
  reapOrphanedShims();
  // Kept only once the standby is reaped: killed, it may still be on its way into its groups.
  const bool reaped = std::none_of(shimsToReap_.begin(), shimsToReap_.end(),
                                   [&](const ShimRecord& r) { return r.pid == s.shim.pid; });
  releaseCgroups(std::move(s.cgroups), reaped);
}

void ProcessExecutor::releaseCgroups(std::vector<std::string> groups, bool reusable) {
  if (groups.empty()) return;
  if (reusable && cgroups_ != nullptr && cgroups_->recycle(groups)) return;
  if (!CgroupManager::remove(groups)) cgroupsToRemove_.push_back(std::move(groups));
}

std::vector<ProcessExecutor::StandbyInfo> ProcessExecutor::standbys() const {
  std::vector<StandbyInfo> out;
  for (const Standby& s : standbys_) out.push_back({s.shim.pid, s.cgroups, s.ready});
  return out;
}

int ProcessExecutor::failToStart(Job& job, const JobSpec& spec, const std::string& message) {
  JobOutcome outcome;
  outcome.state = ActualState::kFailedToStart;
  outcome.finishedAt = clock_.nowMs();
  outcome.message = message;
  // Its groups go now and its record names none: their names (slot-<n>) may be another job's
  // once these are gone, and a restarted agent would sweep that job's groups as this one's.
  if (!CgroupManager::remove(job.cgroups)) cgroupsToRemove_.push_back(job.cgroups);
  job.cgroups.clear();
  // Recorded like any outcome, so a restarted agent still reports it.
  if (job.dir.writeRecord({spec, job.actual.startedAt, {}}).ok()) {
    (void)job.dir.writeOutcome(outcome);
  }
  markFinished(job, outcome);
  return -1;
}

void ProcessExecutor::refresh(Job& job) {
  if (job.actual.state != ActualState::kRunning) return;  // an ending is final
  if (!job.process) {
    job.process = job.dir.readJobPid();
    if (job.process) job.actual.pid = job.process->pid;
  }
  // The outcome first, even while the shim still runs: it exits right after recording it, and a
  // job seen ended here, before that exit, needs no wake of the agent's loop of its own.
  auto outcome = job.dir.readOutcome();
  // Unavailable: not to be read this time (JobDir::readOutcome); the next poll looks again.
  if (!outcome.ok() && outcome.status().code() == Code::kUnavailable) return;
  if (!outcome.ok()) return markLost(job, outcome.status().message());
  if (*outcome) return markFinished(job, **outcome);
  if (shimAlive(job)) {
    if (job.termPending && job.process) job.termPending = !signalJob(job, SIGTERM);
    if (job.killAt && clock_.nowMs() >= *job.killAt) signalJob(job, SIGKILL);
    return;
  }
  // The shim may have recorded the outcome between our two looks.
  outcome = job.dir.readOutcome();
  if (!outcome.ok() && outcome.status().code() == Code::kUnavailable) return;
  if (!outcome.ok()) return markLost(job, outcome.status().message());
  if (*outcome) return markFinished(job, **outcome);
  markLost(job, job.shim ? "allot-job-shim (pid " + std::to_string(job.shim->pid) +
                               ") exited without recording the job's outcome"
                         : std::string("the agent stopped while starting the job"));
}

bool ProcessExecutor::shimAlive(Job& job) {
  if (!job.shim || job.shimReaped) return false;
  if (job.shimIsChild) {
    reapShim(job);
    return !job.shimReaped;
  }
  auto st = readProcStat(job.shim->pid);
  if (!st || st->startTicks != job.shim->startTicks) return false;
  if (st->state == 'Z') {
    reapShim(job);
    return false;
  }
  return true;
}

void ProcessExecutor::markFinished(Job& job, const JobOutcome& outcome) {
  job.actual.state = outcome.state;
  job.actual.exitCode = outcome.exitCode;
  job.actual.signal = outcome.signal;
  job.actual.finishedAt = outcome.finishedAt;
  job.actual.message = outcome.message;
  cleanUpEnded(job);
}

void ProcessExecutor::cleanUpEnded(Job& job) {
  reapShim(job);
  // Not while the shim is still on its way out: it may have helpers in the group, and nothing of
  // the job's can be left but setsid escapees, which can wait for the next poll(). Done again at
  // each poll until the groups are empty: an escapee that forks in a loop must not outlive the
  // job on its GPUs.
  if (job.remnantsKilled || shimAlive(job)) return;
  job.remnantsKilled = cgroups_ != nullptr ? cgroups_->killAllIn(job.cgroups)
                                           : CgroupManager::killAll(job.cgroups);
}

void ProcessExecutor::markLost(Job& job, const std::string& message) {
  spdlog::warn("job={} lost: {}", job.actual.id, message);
  job.actual.state = ActualState::kLost;
  job.actual.finishedAt = clock_.nowMs();
  job.actual.message = message;
  // Nobody is left to report on what the job still runs; it must not keep its GPUs.
  if (job.process && sameLiveProcess(job.process->pid, job.process->startTicks)) {
    ::kill(-job.process->pid, SIGKILL);
  }
  cleanUpEnded(job);
}

bool ProcessExecutor::signalJob(Job& job, int sig) {
  if (!job.process) {
    job.process = job.dir.readJobPid();
    if (job.process) job.actual.pid = job.process->pid;
  }
  // While the shim lives it has not reaped the group leader, so the group id cannot have been
  // handed to anyone else.
  const bool signalled = job.process && shimAlive(job);
  if (signalled) ::kill(-job.process->pid, sig);
  if (sig == SIGKILL) killCgroupRemnants(job);
  return signalled;
}

void ProcessExecutor::killCgroupRemnants(const Job& job) {
  for (int pid : cgroups_ != nullptr ? cgroups_->pidsIn(job.cgroups)
                                      : CgroupManager::pids(job.cgroups)) {
    // The shim stays: it must live to record how the job ended.
    if (job.shim && pid == job.shim->pid) continue;
    ::kill(pid, SIGKILL);
  }
}

void ProcessExecutor::reapShim(Job& job) {
  if (job.shimReaped || !job.shim) return;
  if (!job.shimIsChild) {
    auto st = readProcStat(job.shim->pid);
    if (!st || st->startTicks != job.shim->startTicks) {
      job.shimReaped = true;  // gone, or reaped by init after an agent restart
      return;
    }
  }
  int status;
  pid_t r = ::waitpid(job.shim->pid, &status, WNOHANG);
  if (r == job.shim->pid || (r < 0 && errno == ECHILD)) job.shimReaped = true;
}

void ProcessExecutor::adoptStrayShims() {
  std::vector<pid_t> known;
  for (const auto& [id, job] : jobs_) {
    if (job.shim) known.push_back(job.shim->pid);
  }
  for (const ShimRecord& s : shimsToReap_) known.push_back(s.pid);
  for (const Standby& s : standbys_) known.push_back(s.shim.pid);
  for (pid_t pid : shimServer_->serverPids()) known.push_back(pid);
  for (pid_t pid : strayShims(known)) {
    spdlog::warn("reaping allot-job-shim {}, forked by a shim server that failed before it said so",
                 pid);
    auto stat = readProcStat(pid);  // ours: still there until we reap it
    shimsToReap_.push_back({pid, stat ? stat->startTicks : 0});
  }
}

void ProcessExecutor::reapOrphanedShims() {
  std::erase_if(shimsToReap_, [](const ShimRecord& s) {
    auto st = readProcStat(s.pid);
    if (!st || st->startTicks != s.startTicks) return true;
    int status;
    pid_t r = ::waitpid(s.pid, &status, WNOHANG);
    return r == s.pid || (r < 0 && errno == ECHILD);
  });
}

void ProcessExecutor::stop(int64_t id, int64_t graceMs) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  Job& job = it->second;
  refresh(job);
  if (job.actual.state != ActualState::kRunning) return;
  TimeMs now = clock_.nowMs();
  if (!job.killAt) {
    // SIGTERM once: some launchers take a second one as "abort cleanup now".
    job.killAt = now + std::max<int64_t>(0, graceMs);
    job.termPending = !signalJob(job, SIGTERM);
  }
  if (now >= *job.killAt) signalJob(job, SIGKILL);
}

std::vector<model::ActualJob> ProcessExecutor::poll() {
  // Groups of jobs and standbys that are gone: whatever still runs there is nobody's.
  std::erase_if(cgroupsToRemove_, [](const auto& groups) {
    CgroupManager::killAll(groups);
    return CgroupManager::remove(groups);
  });
  if (shimServer_) {
    shimServer_->reapKilled();
    if (shimServer_->mayHaveLeftAShim()) adoptStrayShims();
  }
  reapOrphanedShims();
  replenishStandbys();
  std::vector<model::ActualJob> out;
  for (auto& [id, job] : jobs_) {
    refresh(job);
    if (job.actual.state != ActualState::kRunning) cleanUpEnded(job);
    out.push_back(job.actual);
  }
  return out;
}

void ProcessExecutor::forget(int64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  Job& job = it->second;
  refresh(job);
  if (job.actual.state == ActualState::kRunning) {
    spdlog::warn("job={} forgotten while running; killing it", id);
    signalJob(job, SIGKILL);
    // Everything in its groups, what forks meanwhile included (cgroup.kill, or rounds of kills):
    // a single pass left a job that forks in a loop alive to refill the directories removed
    // below, and their removal never ended. Nobody is left to read the shim's record.
    if (cgroups_ != nullptr) {
      cgroups_->killAllIn(job.cgroups);
    } else {
      CgroupManager::killAll(job.cgroups);
    }
  } else {
    cleanUpEnded(job);
  }
  reapShim(job);
  const bool shimGone = !job.shim || job.shimReaped;
  if (!shimGone) shimsToReap_.push_back(*job.shim);
  // The directories first: deleting the job's files uncharges their pages from its memory group.
  // What the loop cannot remove in a bounded time is set aside for the remover's thread.
  bool dataSetAside = false;
  Status removed = job.dir.remove(remover_, &dataSetAside);
  if (!removed.ok()) spdlog::warn("job={}: {}", id, removed.message());
  // Its scratch goes with it, as a session's does; until this, a job's stayed until the wipe.
  const TreeRemover::Removal scratch = remover_.remove(scratchPath(id));
  if (scratch.error != 0) {
    spdlog::warn("job={}: cannot remove {}: {}", id, scratchPath(id), std::strerror(scratch.error));
  }
  if (dataSetAside || scratch.setAside)
    spdlog::info("job={} left too many files to remove at once; the rest goes in the background",
                 id);
  // Kept for another job only once nothing of this one's can still join them: a shim that has not
  // joined yet (a start that timed out) would otherwise join the next job's groups; not while a
  // record left behind still names them; and not while files of this one's, still being removed,
  // are charged to its memory group.
  releaseCgroups(std::move(job.cgroups),
                 shimGone && removed.ok() && !dataSetAside && !scratch.setAside);
  jobs_.erase(it);
}

}  // namespace allot::agent

namespace allot::agent {

std::optional<Executor::ContainerFiles> ProcessExecutor::containerOf(int64_t id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.imageRef.empty() ||
      it->second.actual.state != model::ActualState::kRunning)
    return std::nullopt;
  // Where writeBundle() put them: crun's --root and the container's id, and the bundle.
  return ContainerFiles{stateDir_ + "/crun/allot-job-" + std::to_string(id) + "/status",
                        it->second.dir.dataPath() + "/bundle/config.json"};
}

std::vector<std::string> ProcessExecutor::leftoverCgroups() const {
  std::vector<std::string> out;
  if (cgroups_ == nullptr) return out;
  std::set<int64_t> keepJobs;
  std::set<std::string> keepGroups;
  for (const auto& [id, job] : jobs_) {
    if (job.actual.state == ActualState::kRunning) {
      keepJobs.insert(id);
      keepGroups.insert(job.cgroups.begin(), job.cgroups.end());
    }
  }
  for (const Standby& s : standbys_) keepGroups.insert(s.cgroups.begin(), s.cgroups.end());
  out = cgroups_->strayGroups(keepJobs, keepGroups);
  for (const auto& groups : cgroupsToRemove_) out.insert(out.end(), groups.begin(), groups.end());
  for (const auto& [id, job] : jobs_) {
    if (job.actual.state != ActualState::kRunning)
      out.insert(out.end(), job.cgroups.begin(), job.cgroups.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace allot::agent
