#pragma once
// ProcessExecutor: runs each job as a plain process tree on this host, supervised by
// allot-job-shim (see job_shim_main.cc) and confined by cgroups where the host has them.
//
// The agent never forks: it posix_spawns one shim per job in a new session. The shim owns the
// job's process; the executor learns what happened from files the shim leaves in the job's
// directory (see job_dir.h). So jobs survive an agent restart, and a new ProcessExecutor on the
// same workDir re-adopts them at construction: running jobs stay tracked, jobs that ended while
// the agent was down report their real outcome, and jobs whose shim died with no outcome
// (killed -9, OOM) report lost.
//
// Owns nothing it is given: clock and cgroups (which may be null: run unconfined) must outlive
// it. Driven from the agent's loop only; not thread-safe.

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/exec/cgroup_manager.h"
#include "agent/exec/executor.h"
#include "agent/exec/job_dir.h"
#include "common/clock.h"

namespace allot::agent {

class ProcessExecutor final : public Executor {
 public:
  // workDir holds jobs/<id>/ for every job; shimPath is the allot-job-shim binary.
  ProcessExecutor(std::string workDir, std::string shimPath, const Clock& clock,
                  CgroupManager* cgroups);
  // Leaves jobs running, for the next ProcessExecutor to adopt.
  ~ProcessExecutor() override = default;

  // Executor
  model::ActualJob start(const JobSpec& spec) override;
  void stop(int64_t id, int64_t graceMs) override;
  std::vector<model::ActualJob> poll() override;
  void forget(int64_t id) override;
  bool knows(int64_t id) const override { return jobs_.count(id) > 0; }
  std::string logPath(int64_t id) const override { return JobDir(workDir_, id).logPath(); }

  // How long start() waits for the shim to report that the command was exec'd.
  static constexpr int64_t kStartTimeoutMs = 10'000;

 private:
  struct Job {
    explicit Job(JobDir d) : dir(std::move(d)) {}
    JobDir dir;
    model::ActualJob actual;
    std::vector<std::string> cgroups;
    std::optional<ShimRecord> shim;     // unknown only if the agent died while spawning it
    std::optional<ShimRecord> process;  // the job's main process; its pid is its process group
    bool shimReaped = false;
    bool remnantsKilled = false;   // the cgroups were swept after the job ended
    std::optional<TimeMs> killAt;  // stop() was called: SIGKILL is due then
  };

  void adoptAll();
  model::ActualJob failToStart(Job& job, const JobSpec& spec, const std::string& message);
  // Brings job.actual up to date with the job's files and processes.
  void refresh(Job& job);
  bool shimAlive(Job& job);
  void markFinished(Job& job, const JobOutcome& outcome);
  void markLost(Job& job, const std::string& message);
  // Sends sig to the job's process group (while it may still exist) and, for SIGKILL, to every
  // process left in its cgroups (which catches those that escaped the group with setsid).
  void signalJob(Job& job, int sig);
  void killCgroupRemnants(const Job& job);
  // After the job ended: reaps the shim and, once it has exited, sweeps the job's cgroups.
  void cleanUpEnded(Job& job);
  void removeStrayCgroups();
  void reapShim(Job& job);
  void reapOrphanedShims();

  std::string workDir_;
  std::string shimPath_;
  const Clock& clock_;
  CgroupManager* cgroups_;
  std::map<int64_t, Job> jobs_;
  // Groups of forgotten jobs that still held a dying process; removed on a later poll().
  std::vector<std::vector<std::string>> cgroupsToRemove_;
  // Shims of forgotten jobs, still to be reaped once they exit.
  std::vector<ShimRecord> shimsToReap_;
};

}  // namespace allot::agent
