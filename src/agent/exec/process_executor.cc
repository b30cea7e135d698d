#include "agent/exec/process_executor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>

#include "agent/exec/proc.h"
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

std::vector<std::string> jobEnvironment(const JobSpec& spec) {
  std::map<std::string, std::string> env = {{"PATH", kDefaultPath}};
  for (const auto& [k, v] : spec.env) env[k] = v;
  // Set last so that a job cannot widen its own GPUs. "void" is what NVIDIA's container runtime
  // takes to mean "no GPUs"; CUDA takes the empty string the same way.
  std::string gpus = join(spec.gpuUuids, ",");
  env["CUDA_VISIBLE_DEVICES"] = gpus;
  env["NVIDIA_VISIBLE_DEVICES"] = gpus.empty() ? "void" : gpus;
  env["ALLOT_JOB_ID"] = std::to_string(spec.id);
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> cStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Blocks until the other end of fd is closed, or timeoutMs passes.
void waitForClose(int fd, int64_t timeoutMs) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  char buf[64];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return;
    pollfd p = {fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return;
  }
}

bool isNumber(const std::string& s) {
  return !s.empty() && s.size() < 19 && s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

ProcessExecutor::ProcessExecutor(std::string workDir, std::string shimPath, const Clock& clock,
                                 CgroupManager* cgroups)
    : workDir_(std::move(workDir)),
      shimPath_(std::move(shimPath)),
      clock_(clock),
      cgroups_(cgroups) {
  adoptAll();
  removeStrayCgroups();
}

void ProcessExecutor::adoptAll() {
  std::error_code ec;
  fs::directory_iterator it(workDir_ + "/jobs", ec);
  if (ec) return;  // no jobs yet
  for (const auto& entry : it) {
    std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !isNumber(name)) continue;
    int64_t id = std::stoll(name);
    Job job{JobDir(workDir_, id)};
    auto record = job.dir.readRecord();
    if (!record.ok()) {
      // The agent stopped before it wrote the spec, so before it started anything.
      spdlog::warn("removing incomplete job directory {}: {}", job.dir.path(),
                   record.status().message());
      (void)job.dir.remove();
      continue;
    }
    job.actual.id = id;
    job.actual.state = ActualState::kRunning;
    job.actual.startedAt = record->startedAt;
    job.cgroups = record->cgroups;
    job.shim = job.dir.readShim();
    refresh(job);
    spdlog::info("re-adopted job={} state={}", id, model::actualStateName(job.actual.state));
    jobs_.emplace(id, std::move(job));
  }
}

void ProcessExecutor::removeStrayCgroups() {
  if (cgroups_ == nullptr) return;
  std::set<int64_t> known;
  for (const auto& [id, job] : jobs_) known.insert(id);
  std::vector<std::string> stray = cgroups_->strayGroups(known);
  if (stray.empty()) return;
  spdlog::warn("removing {} cgroups of jobs this agent no longer knows", stray.size());
  // Whatever still runs there belongs to no job anyone tracks, and may hold GPUs.
  for (int pid : CgroupManager::pids(stray)) ::kill(pid, SIGKILL);
  if (!CgroupManager::remove(stray)) cgroupsToRemove_.push_back(stray);
}

model::ActualJob ProcessExecutor::start(const JobSpec& spec) {
  if (auto it = jobs_.find(spec.id); it != jobs_.end()) {
    refresh(it->second);
    return it->second.actual;
  }
  Job& job = jobs_.emplace(spec.id, Job{JobDir(workDir_, spec.id)}).first->second;
  job.actual.id = spec.id;
  job.actual.state = ActualState::kRunning;
  job.actual.startedAt = clock_.nowMs();

  if (Status st = job.dir.create(); !st.ok()) return failToStart(job, spec, st.message());
  if (spec.command.empty() || spec.command[0].empty()) {
    return failToStart(job, spec, "empty command");
  }
  if (cgroups_ != nullptr) {
    auto groups = cgroups_->create(spec);
    if (!groups.ok()) {
      return failToStart(job, spec, "failed to confine the job: " + groups.status().message());
    }
    job.cgroups = *groups;
  }
  if (Status st = job.dir.writeRecord({spec, job.actual.startedAt, job.cgroups}); !st.ok()) {
    return failToStart(job, spec, st.message());
  }

  std::vector<std::string> args = {shimPath_,
                                   "--job-dir",
                                   job.dir.path(),
                                   "--log",
                                   job.dir.logPath(),
                                   "--cwd",
                                   job.dir.workPath(),
                                   "--report-fd",
                                   std::to_string(kReportFd)};
  for (const auto& g : job.cgroups) {
    args.push_back("--cgroup");
    args.push_back(g);
  }
  args.push_back("--");
  args.insert(args.end(), spec.command.begin(), spec.command.end());
  std::vector<std::string> env = jobEnvironment(spec);
  std::vector<char*> argv = cStrings(args), envp = cStrings(env);

  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    return failToStart(job, spec, std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  // Moved above kReportFd so the dup2 below really clears close-on-exec on the shim's copy.
  int reportWrite = ::fcntl(report[1], F_DUPFD_CLOEXEC, kReportFd + 1);
  ::close(report[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, reportWrite, kReportFd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A session of its own: the shim outlives the agent and no terminal signal reaches it.
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, shimPath_.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(reportWrite);
  if (rc != 0) {
    ::close(report[0]);
    return failToStart(job, spec, "cannot run " + shimPath_ + ": " + std::strerror(rc));
  }

  auto stat = readProcStat(pid);  // still there: only we can reap it
  job.shim = ShimRecord{pid, stat ? stat->startTicks : 0};
  if (Status st = job.dir.writeShim(*job.shim); !st.ok()) {
    spdlog::warn("job={} cannot record its shim; a restarted agent will report it lost: {}",
                 spec.id, st.message());
  }
  waitForClose(report[0], kStartTimeoutMs);
  ::close(report[0]);
  refresh(job);
  return job.actual;
}

model::ActualJob ProcessExecutor::failToStart(Job& job, const JobSpec& spec,
                                              const std::string& message) {
  JobOutcome outcome;
  outcome.state = ActualState::kFailedToStart;
  outcome.finishedAt = clock_.nowMs();
  outcome.message = message;
  // Recorded like any outcome, so a restarted agent still reports it.
  if (job.dir.writeRecord({spec, job.actual.startedAt, job.cgroups}).ok()) {
    (void)job.dir.writeOutcome(outcome);
  }
  markFinished(job, outcome);
  CgroupManager::remove(job.cgroups);
  return job.actual;
}

void ProcessExecutor::refresh(Job& job) {
  if (job.actual.state != ActualState::kRunning) return;  // an ending is final
  if (!job.process) {
    job.process = job.dir.readJobPid();
    if (job.process) job.actual.pid = job.process->pid;
  }
  auto outcome = job.dir.readOutcome();
  if (!outcome.ok()) return markLost(job, outcome.status().message());
  if (*outcome) return markFinished(job, **outcome);
  if (shimAlive(job)) {
    if (job.killAt && clock_.nowMs() >= *job.killAt) signalJob(job, SIGKILL);
    return;
  }
  // The shim may have recorded the outcome between our two looks.
  outcome = job.dir.readOutcome();
  if (outcome.ok() && *outcome) return markFinished(job, **outcome);
  markLost(job, job.shim ? "allot-job-shim (pid " + std::to_string(job.shim->pid) +
                               ") exited without recording the job's outcome"
                         : std::string("the agent stopped while starting the job"));
}

bool ProcessExecutor::shimAlive(Job& job) {
  if (!job.shim) return false;
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
  // the job's can be left but setsid escapees, which can wait for the next poll().
  if (job.remnantsKilled || (job.shim && sameLiveProcess(job.shim->pid, job.shim->startTicks))) {
    return;
  }
  killCgroupRemnants(job);
  job.remnantsKilled = true;
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

void ProcessExecutor::signalJob(Job& job, int sig) {
  if (!job.process) {
    job.process = job.dir.readJobPid();
    if (job.process) job.actual.pid = job.process->pid;
  }
  // While the shim lives it has not reaped the group leader, so the group id cannot have been
  // handed to anyone else.
  if (job.process && shimAlive(job)) ::kill(-job.process->pid, sig);
  if (sig == SIGKILL) killCgroupRemnants(job);
}

void ProcessExecutor::killCgroupRemnants(const Job& job) {
  for (int pid : CgroupManager::pids(job.cgroups)) {
    // The shim stays: it must live to record how the job ended.
    if (job.shim && pid == job.shim->pid) continue;
    ::kill(pid, SIGKILL);
  }
}

void ProcessExecutor::reapShim(Job& job) {
  if (job.shimReaped || !job.shim) return;
  auto st = readProcStat(job.shim->pid);
  if (!st || st->startTicks != job.shim->startTicks) {
    job.shimReaped = true;  // gone, or reaped by init after an agent restart
    return;
  }
  int status;
  pid_t r = ::waitpid(job.shim->pid, &status, WNOHANG);
  if (r == job.shim->pid || (r < 0 && errno == ECHILD)) job.shimReaped = true;
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
    signalJob(job, SIGTERM);
  }
  if (now >= *job.killAt) signalJob(job, SIGKILL);
}

std::vector<model::ActualJob> ProcessExecutor::poll() {
  std::erase_if(cgroupsToRemove_, [](const auto& groups) { return CgroupManager::remove(groups); });
  reapOrphanedShims();
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
  } else {
    cleanUpEnded(job);
  }
  reapShim(job);
  if (!job.shimReaped && job.shim) shimsToReap_.push_back(*job.shim);
  if (!CgroupManager::remove(job.cgroups)) cgroupsToRemove_.push_back(job.cgroups);
  if (Status st = job.dir.remove(); !st.ok()) spdlog::warn("job={}: {}", id, st.message());
  jobs_.erase(it);
}

}  // namespace allot::agent
