#pragma once
// ProcessExecutor: runs each job as a plain process tree on this host, supervised by
// allot-job-shim (see job_shim_main.cc) and confined by cgroups where the host has them.
//
// The agent never forks: one shim per job, in a new session, is forked by the shim server or
// else posix_spawned (shim_server.h), either way the agent's own child. The shim owns the
// job's process; the executor learns what happened from files the shim leaves in the job's
// directory (see job_dir.h). So jobs survive an agent restart, and a new ProcessExecutor on the
// same workDir re-adopts them at construction: running jobs stay tracked, jobs that ended while
// the agent was down report their real outcome, and jobs whose shim died with no outcome
// (killed -9, OOM) report lost.
//
// Standby shims. Joining a cgroup v1 hierarchy costs the kernel ~10 ms (an RCU grace period on
// the first migration), which would be paid on every job start. So where the host has cgroups the
// executor keeps `standbys` shims (default 1) spawned ahead of any job, each already in a fresh
// spare group of its own (slot-<n>, see cgroup_manager.h) and waiting on a socket with nothing of
// any job's to run. start() takes a ready one: writes the job's limits and device rules into its
// groups, records the job (its groups are the slot's, its shim the standby), and only then sends
// the shim the job (protocol in job_shim_main.cc). poll() replaces standbys that were used or
// died; start() never makes or waits for one. Without a ready standby (jobs came faster than
// they were replaced), with cgroups mode "none", or when the standby cannot take the job, start()
// spawns a shim for the job as before: into job-<id> groups. A standby that dies on its own (it
// could not join its groups) is replaced only after kStandbyRetryMs. Standbys are not jobs:
// destroying the executor kills them, and one left by an agent that died exits when its socket
// closes; its group is removed by the next executor, like other groups that no known job holds.
//
// Owns nothing it is given: clock and cgroups (which may be null: run unconfined) must outlive
// it. Driven from the agent's loop only; not thread-safe.

#include <sys/types.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/exec/cgroup_manager.h"
#include "agent/exec/driver_files.h"
#include "agent/exec/executor.h"
#include "agent/exec/job_dir.h"
#include "agent/exec/shim_server.h"
#include "common/clock.h"

namespace allot::agent {

// Where a job runs on the host, as its environment says; teamDir "" = none.
struct JobPlaces {
  std::string scratch, work, teamDir;
};

class ProcessExecutor final : public Executor {
 public:
  // workDir holds jobs/<id>/ for every job's data, stateDir (default: workDir) its records (see
  // job_dir.h); shimPath is the allot-job-shim binary; standbys is how many standby shims to
  // keep ready (0: none; ignored without cgroups). Jobs recorded in the work dir by an agent
  // without a state dir are re-adopted where they are.
  ProcessExecutor(std::string workDir, std::string shimPath, const Clock& clock,
                  CgroupManager* cgroups, int standbys = 1, std::string stateDir = "");
  // Leaves jobs running, for the next ProcessExecutor to adopt. Kills the standby shims.
  ~ProcessExecutor() override;
  ProcessExecutor(const ProcessExecutor&) = delete;
  ProcessExecutor& operator=(const ProcessExecutor&) = delete;

  // Executor
  model::ActualJob start(const JobSpec& spec) override;
  std::vector<model::ActualJob> startAll(const std::vector<JobSpec>& specs) override;
  void stop(int64_t id, int64_t graceMs) override;
  std::vector<model::ActualJob> poll() override;
  void forget(int64_t id) override;
  bool knows(int64_t id) const override { return jobs_.count(id) > 0; }
  std::vector<int> gpusOf(int64_t id) const override {
    auto it = jobs_.find(id);
    return it == jobs_.end() ? std::vector<int>{} : it->second.gpuIndices;
  }
  int pidOf(int64_t id) const override {
    auto it = jobs_.find(id);
    return it == jobs_.end() || it->second.actual.state != model::ActualState::kRunning
               ? 0
               : it->second.actual.pid;
  }
  int shimPidOf(int64_t id) const override {
    auto it = jobs_.find(id);
    return it == jobs_.end() || it->second.actual.state != model::ActualState::kRunning ||
                   !it->second.shim || it->second.shimReaped
               ? 0
               : it->second.shim->pid;
  }
  std::vector<std::string> cgroupsOf(int64_t id) const override {
    auto it = jobs_.find(id);
    return it == jobs_.end() ? std::vector<std::string>{} : it->second.cgroups;
  }
  std::optional<ContainerFiles> containerOf(int64_t id) const override;
  std::string logPath(int64_t id) const override { return JobDir(workDir_, id).logPath(); }
  std::string workPath(int64_t id) const override { return JobDir(workDir_, id).workPath(); }
  std::vector<std::string> leftoverCgroups() const override;

  // Where each job's scratch directory (<root>/<job id>, $ALLOT_SCRATCH) is made; default
  // <workDir>/scratch. Set before the first start().
  void setScratchRoot(std::string root);
  // $ALLOT_SCRATCH of job `id`: made as it starts, removed when it is forgotten.
  std::string scratchPath(int64_t id) const { return scratchRoot_ + "/" + std::to_string(id); }
  // Workloads run as their owner (docs/access.md): the shim drops to JobSpec::runAs (setgroups,
  // setgid, setuid) before exec, the job's working and scratch directories are the owner's (mode
  // 0700) and its job directory the owner's group's (0710) so that other users read none of
  // them. A job without an identity, or with uid or gid 0, fails to start. false (an agent that
  // is not root cannot switch users): every job runs as the agent's own user. Set before the
  // first start().
  void setRunAsOwner(bool required) { runAsOwner_ = required; }
  // The host's driver files a job in an image with real GPUs gets (driver_files.h); set once,
  // before the first start().
  void setDriverFiles(std::vector<DriverFile> files) { driverFiles_ = std::move(files); }
  // linux.seccomp for jobs in images, as JSON text (container_config.h, ociSeccomp()); "" = none.
  // Compiled here once (seccomp_bpf.h), so that crun does not compile it at every start.
  void setSeccomp(std::string seccomp);
  // Where each team's directory is made (<root>/<team>, $ALLOT_TEAM_DIR): owned by root and the
  // team's group, mode 2770, so that the team's members share it and no one else reads it. ""
  // (the default): no team directories. Set before the first start().
  void setTeamRoot(std::string root) { teamRoot_ = std::move(root); }

  // How long start() waits for the shims to report that their commands were exec'd.
  static constexpr int64_t kStartTimeoutMs = 10'000;
  // How long poll() waits before replacing a standby that could not be made or died unused.
  static constexpr int64_t kStandbyRetryMs = 10'000;

  struct StandbyInfo {
    pid_t pid = 0;
    std::vector<std::string> cgroups;  // its spare groups, which the job it takes will keep
    bool ready = false;                // it has joined them and waits for a job
  };
  // Whether shims are forked by a shim server (default) or each spawned (shim_server.h).
  void setShimServer(bool enabled);
  // The shim server's pid; -1 while there is none (tests).
  pid_t shimServerPid() const { return shimServer_ ? shimServer_->pid() : -1; }

  // The standby shims as of the last poll() or start(), oldest first (tests, diagnostics).
  std::vector<StandbyInfo> standbys() const;
  ImagesInUse imagesInUse() const override;

 private:
  struct Job {
    explicit Job(JobDir d) : dir(std::move(d)) {}
    JobDir dir;
    model::ActualJob actual;
    std::vector<std::string> cgroups;
    std::vector<int> gpuIndices;
    std::optional<ShimRecord> shim;     // unknown only if the agent died while spawning it
    std::optional<ShimRecord> process;  // the job's main process; its pid is its process group
    // This agent process spawned the shim (not an adopted job's): its pid stays its own until
    // waitpid reaps it, so waitpid alone tells whether it lives, without a look at /proc.
    bool shimIsChild = false;
    bool shimReaped = false;
    bool remnantsKilled = false;   // the cgroups were found empty after the job ended
    std::optional<TimeMs> killAt;  // stop() was called: SIGKILL is due then
    // stop() was called before the job's process was known (its shim had not recorded it yet):
    // the SIGTERM goes as soon as it is, so a job stopped while starting still gets its grace.
    bool termPending = false;
    std::string imageRef;                  // a job in an image: its reference
    std::vector<std::string> imageLayers;  // and the layers its container mounts
  };

  // A shim spawned ahead of any job, in spare groups, waiting for one on `socket`.
  struct Standby {
    ShimRecord shim;
    std::vector<std::string> cgroups;
    int socket = -1;  // the executor's end; the shim's is its descriptor kReportFd
    bool ready = false;
  };

  void adoptAll();
  // Adopts the jobs recorded under root/jobs; `seen` gains their ids.
  void adoptFrom(const std::string& root, std::set<int64_t>& seen);
  // Data directories (workDir/jobs/<id>) of jobs with no records anywhere: their records were
  // on a state dir the host's restart emptied.
  void removeOrphanedData(const std::set<int64_t>& known);
  // A job's start up to its shim having the job: the end of the socket the shim closes once the
  // command was exec'd, or -1 when there is nothing to wait for (it failed to start: job.actual
  // says so).
  int begin(const JobSpec& spec);
  // Records that the job failed to start, saying `message`; -1, for begin() to return.
  int failToStart(Job& job, const JobSpec& spec, const std::string& message);
  // Gives the job groups of its own (job-<id>) and writes its record; an error is the job's
  // failed_to_start message.
  Status confineAndRecord(Job& job, const JobSpec& spec);
  // A job in an image: its bundle (config.json, the rootfs mount point) and overlay directories
  // in its data directory; what the shim is told to mount, and crun's command line.
  struct Bundle {
    std::vector<std::string> shimArgs;
    std::vector<std::string> crun;
  };
  Result<Bundle> writeBundle(const Job& job, const JobSpec& spec,
                             const std::vector<std::string>& env, const JobPlaces& places);
  // Under runAsOwner_: the job's directories become its owner's (see setRunAsOwner).
  Status giveToOwner(const Job& job, const JobSpec& spec, const std::string& scratch);
  // Hands the job to the standby, whose groups it was recorded with; false (the standby retired)
  // if the standby could not take it.
  bool handOver(Job& job, Standby& standby, const std::vector<std::string>& args,
                const std::vector<std::string>& env);
  // A new shim with `args` (its argv after argv[0]) and one end of a new socket pair as its
  // descriptor kReportFd; `socket` is the executor's end. Forked by the shim server, or else
  // posix_spawned (shim_server.h); either way in a session of its own, the executor's child, with
  // an empty environment: it runs as root, and nothing of the job's may reach it but as data.
  struct SpawnedShim {
    ShimRecord record;
    int socket = -1;
  };
  Result<SpawnedShim> spawnShim(const std::vector<std::string>& args);
  // Tops the standbys up to standbyTarget_, after dropping dead ones.
  void replenishStandbys();
  Result<Standby> spawnStandby();
  // Reads what the standby said ('R': ready); false once it has exited.
  bool standbyAlive(Standby& s);
  // A ready, live standby, removed from standbys_; nullopt if there is none.
  std::optional<Standby> takeStandby();
  // Kills the standby; its reaping and the removal of its groups finish in later poll()s if need
  // be.
  void retireStandby(Standby& s);
  // Brings job.actual up to date with the job's files and processes.
  void refresh(Job& job);
  // Whether the job's shim still runs; reaps it when it is ours and has exited.
  bool shimAlive(Job& job);
  void markFinished(Job& job, const JobOutcome& outcome);
  void markLost(Job& job, const std::string& message);
  // Sends sig to the job's process group (while it may still exist) and, for SIGKILL, to every
  // process left in its cgroups (which catches those that escaped the group with setsid).
  // Whether the group was signalled: false while the job's process is not known yet.
  bool signalJob(Job& job, int sig);
  void killCgroupRemnants(const Job& job);
  // After the job ended: reaps the shim and, once it has exited, sweeps the job's cgroups.
  void cleanUpEnded(Job& job);
  void removeStrayCgroups();
  // An ended job's or a retired standby's groups: when `reusable`, kept for the next job where they
  // can be (CgroupManager::recycle), else removed, or removed at a later poll() while a process
  // is left.
  void releaseCgroups(std::vector<std::string> groups, bool reusable);
  void reapShim(Job& job);
  void reapOrphanedShims();
  // Shims a failed shim server forked without telling us (ShimServer::mayHaveLeftAShim): to be
  // reaped with the orphaned ones.
  void adoptStrayShims();
  // The job groups' directories, for the shim server (none without groups).
  std::vector<std::string> cgroupBases() const {
    return cgroups_ != nullptr ? cgroups_->bases() : std::vector<std::string>{};
  }

  std::string workDir_;
  std::string stateDir_;
  std::string scratchRoot_;
  std::string teamRoot_;
  std::vector<DriverFile> driverFiles_;
  std::string seccomp_;
  std::string seccompBpf_;  // seccomp_ compiled, base64; "" = crun compiles it
  bool runAsOwner_ = false;
  std::string shimPath_;
  const Clock& clock_;
  CgroupManager* cgroups_;
  std::map<int64_t, Job> jobs_;
  // Removes jobs' data and scratch, what it cannot in a bounded time on a thread of its own.
  TreeRemover remover_;
  // Groups of forgotten jobs that still held a dying process; removed on a later poll().
  std::vector<std::vector<std::string>> cgroupsToRemove_;
  // Shims of forgotten jobs and retired standbys, still to be reaped once they exit.
  std::vector<ShimRecord> shimsToReap_;
  std::unique_ptr<ShimServer> shimServer_;  // null: every shim is spawned
  int standbyTarget_;
  std::deque<Standby> standbys_;
  TimeMs standbyRetryAt_ = 0;  // no new standby before then, after one failed
};

}  // namespace allot::agent
