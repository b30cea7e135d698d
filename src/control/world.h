#pragma once
// World: the control plane's live state in memory, loaded from the store at start and changed
// only through Cluster and its services. The indexes derived from the jobs are private: only
// reindex and onJobChanged change them. Not thread-safe: allotd touches it from its one I/O
// thread.

#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/ledger_index.h"
#include "model/agent_protocol.h"
#include "model/model.h"
#include "sched/fleet.h"
#include "store/store.h"

namespace allot::control {

// A team's quota position as the last scheduling pass saw it, for `GET /teams/{team}/quota`.
// Filled by the scheduling side; `known` stays false until a pass has looked at the team.
struct TeamQuotaStatus {
  // In GPUs; fractional jobs make fractions. Guarantees beyond what the pool has now are shown
  // as scaled down (see docs/scheduler.md).
  double guaranteed = 0;  // GPUs guaranteed, all models together
  double within = 0;      // GPUs in use within the guarantee
  double borrowed = 0;    // GPUs in use beyond it
  double lendable = 0;    // idle guarantee others may borrow now
  double share = 0;       // fair-share key: lower goes first when borrowing
  bool known = false;
};

// The latest readings of one GPU, as its agent sent them: the live view, lost (and refilled within
// one interval) when allotd restarts. The history goes to telemetry.db (telemetry/).
struct GpuTelemetry {
  model::GpuSample sample;
  TimeMs sampledAt = 0;   // the agent's clock
  TimeMs receivedAt = 0;  // allotd's clock: freshness is judged by this, immune to clock skew
  int64_t intervalMs = 0;
};

// A sample counts as current while it is younger than this many of its agent's intervals.
inline constexpr int64_t kTelemetryFreshIntervals = 3;

// The bytes of a job's command and environment, as the limits count them.
int64_t specBytes(const model::Job& j);

struct World {
  World() = default;
  // Not copied: the job index points into this world's `jobs` (a move takes its elements along).
  World(const World&) = delete;
  World& operator=(const World&) = delete;
  World(World&&) = default;
  World& operator=(World&&) = default;

  std::map<std::string, model::Team> teams;
  std::map<std::string, model::User> users;
  std::map<std::string, model::ApiToken> tokens;       // by token id
  std::map<std::string, model::Project> projects;      // by "team/name"
  std::map<std::string, model::JoinToken> joinTokens;  // by id
  std::map<std::string, model::Host> hosts;
  // Every job kept, by id. Never erased from (the index below points at its elements): a job is
  // inserted here and then passed to onJobChanged.
  std::map<int64_t, model::Job> jobs;

  // The allocation ledger, folded for usage reports; Cluster appends to it beside the store.
  LedgerIndex ledger;

  // Every admin-state transition of each host, oldest first (few: people make them).
  std::map<std::string, std::vector<model::HostTransition>> hostTransitions;
  int64_t nextHostTransitionId = 1;

  // Rolling upgrades, every one (few: people start them).
  std::map<int64_t, model::Upgrade> upgrades;
  int64_t nextUpgradeId = 1;

  int64_t nextJobId = 1;
  // The next uid and team gid allotd hands out (0: the start of its range); never goes back.
  int64_t nextUid = 0;
  int64_t nextGid = 0;
  int64_t nextSecretSeq = 1;  // numbers the public ids of tokens of every kind

  // Derived from the jobs, read through these and changed only by `reindex` and `onJobChanged`
  // (private below), so that no caller can leave them out of step with the jobs.
  struct Active {
    int jobs = 0;
    int64_t specBytes = 0;
  };
  // The jobs in state queued, by id; ids grow with submission, so FIFO order. Each pass walks
  // them all: with the job beside its id, a deep queue costs the walk no hash lookup a job.
  const std::map<int64_t, model::Job*>& queued() const { return queued_; }
  // Those of them with dependencies: what a pass checks for a dependency that can never hold,
  // without walking the whole queue.
  const std::set<int64_t>& queuedWithDependencies() const { return queuedWithDependencies_; }
  // Jobs not yet ended (queued, scheduled or running), and the bytes of their commands and
  // environments, by user and by team: the job limits.
  const std::map<std::string, Active>& activeByUser() const { return activeByUser_; }
  const std::map<std::string, Active>& activeByTeam() const { return activeByTeam_; }
  // host -> GPU index -> job ids (several when fractions share a GPU)
  const std::map<std::string, std::multimap<int, int64_t>>& gpuHolders() const {
    return gpuHolders_;
  }
  // host -> its scheduled/running jobs; a gang is listed under every host it has a rank on
  const std::map<std::string, std::set<int64_t>>& hostJobs() const { return hostJobs_; }
  // How many jobs are in each state, and the preemptions of them all (each requeue after one, and
  // the jobs that ended preempted): what /metrics reports, without a walk of every job ever kept.
  const std::map<model::JobState, int64_t>& jobsByState() const { return jobsByState_; }
  int64_t preemptions() const { return preemptions_; }
  // The jobs in hostJobs, each once (a gang is listed under each of its hosts), by id: a copy,
  // so that callers may change jobs as they go. Kept as a list between changes: the liveness
  // tick's scans (idle allocations, max runtimes, usage) walk every running job each second, and
  // walking trees of ids, then looking each job up, took a tenth of a second at 80,000.
  std::vector<model::Job*> heldJobs();
  std::vector<const model::Job*> heldJobs() const;
  // A copy of one host's, empty when it holds none (callers that end jobs edit the index).
  std::set<int64_t> hostJobsOf(const std::string& host) const {
    auto it = hostJobs_.find(host);
    return it == hostJobs_.end() ? std::set<int64_t>{} : it->second;
  }
  // The last scheduling pass's word on each job still queued, sorted by job id, so a lookup is a
  // binary search and a pass refills it without allocating per job.
  std::vector<sched::Wait> waits;
  // Passes that refused their snapshot (a metric), and the last such error while it lasts.
  int64_t refusedPasses = 0;
  std::string schedulerError;
  // How the last pass placed each job it placed, for `explain`; onJobChanged drops it when the
  // job ends or goes back to the queue.
  std::map<int64_t, sched::Placement> placedBy;
  std::map<std::string, TeamQuotaStatus> quotaStatus;  // by team; written by the scheduling pass
  // host -> GPU index -> its latest readings; written by Cluster::agentTelemetry.
  std::map<std::string, std::map<int, GpuTelemetry>> telemetry;

  // The readings of a GPU if they are current at `now`, else null.
  const GpuTelemetry* freshTelemetry(const std::string& host, int gpu, TimeMs now) const;
  // The hosts running `user`'s live sessions (whose agents hold the user's SSH keys).
  std::set<std::string> sessionHostsOf(const std::string& user) const;

  void load(const store::Contents& contents);
  void reindex();

  // Keeps the derived indexes right when a job changes; call with the job's old copy. Cluster
  // calls it for every change of a job (Cluster::updateJob and submission).
  void onJobChanged(const model::Job* before, const model::Job& after);
  // How many times a job has changed (onJobChanged), 0 for no such job: a reply built before a
  // write that shows the job again after it rebuilds only what may have moved since.
  uint64_t jobRevision(int64_t id) const {
    auto it = jobIndex_.find(id);
    return it == jobIndex_.end() ? 0 : it->second.revision;
  }
  // jobs.at(id), by a hash lookup: the scans over every running or queued job (each liveness
  // tick, each scheduling pass) spent most of their time walking the tree of every job ever
  // kept, one cache miss a level, once tens of thousands were. Throws std::out_of_range for an
  // id not in `jobs`, as at() does.
  const model::Job& job(int64_t id) const { return const_cast<World*>(this)->job(id); }
  model::Job& job(int64_t id) {
    model::Job* j = findJob(id);
    if (j == nullptr) throw std::out_of_range("no job " + std::to_string(id));
    return *j;
  }
  // The same, null for no such job.
  const model::Job* findJob(int64_t id) const { return const_cast<World*>(this)->findJob(id); }
  model::Job* findJob(int64_t id) {
    if (auto it = jobIndex_.find(id); it != jobIndex_.end()) return it->second.job;
    auto it = jobs.find(id);  // one not indexed yet: added, and onJobChanged not called yet
    return it == jobs.end() ? nullptr : &it->second;
  }

  // A fresh public id for a secret of `kind` ("tok-12", "join-3"): one sequence for every kind.
  std::string newSecretId(const char* kind) {
    return std::string(kind) + "-" + std::to_string(nextSecretSeq++);
  }

  static std::string projectKey(const std::string& team, const std::string& name) {
    return team + "/" + name;
  }

 private:
  std::map<int64_t, model::Job*> queued_;
  // One per job that went through onJobChanged: its element of `jobs` (std::map elements stay
  // where they are, and none is erased) and how many times it changed.
  struct IndexedJob {
    model::Job* job = nullptr;
    uint64_t revision = 0;
  };
  std::unordered_map<int64_t, IndexedJob> jobIndex_;
  std::set<int64_t> queuedWithDependencies_;
  std::map<std::string, Active> activeByUser_;
  std::map<std::string, Active> activeByTeam_;
  std::map<std::string, std::multimap<int, int64_t>> gpuHolders_;
  std::map<std::string, std::set<int64_t>> hostJobs_;
  std::set<int64_t> heldJobs_;
  std::map<model::JobState, int64_t> jobsByState_;
  int64_t preemptions_ = 0;
  mutable std::vector<model::Job*> heldList_;  // heldJobs_'s jobs, unless heldListStale_
  mutable bool heldListStale_ = true;
};

}  // namespace allot::control
