#pragma once
// World: the control plane's live state in memory, loaded from the store at start and changed
// only through Cluster. Not thread-safe: allotd touches it from its one I/O thread.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "model/model.h"
#include "sched/scheduler.h"
#include "store/store.h"

namespace allot::control {

// A team's quota position as the last scheduling pass saw it, for `GET /teams/{team}/quota`.
// Filled by the scheduling side; `known` stays false until a pass has looked at the team.
struct TeamQuotaStatus {
  int guaranteed = 0;  // GPUs guaranteed, all models together
  int within = 0;      // GPUs in use within the guarantee
  int borrowed = 0;    // GPUs in use beyond it
  int lendable = 0;    // idle guarantee others may borrow now
  double share = 0;    // fair-share key: lower goes first when borrowing
  bool known = false;
};

struct World {
  std::map<std::string, model::Team> teams;
  std::map<std::string, model::User> users;
  std::map<std::string, model::ApiToken> tokens;       // by token id
  std::map<std::string, model::Project> projects;      // by "team/name"
  std::map<std::string, model::JoinToken> joinTokens;  // by id
  std::map<std::string, model::Host> hosts;
  std::map<int64_t, model::Job> jobs;

  int64_t nextJobId = 1;
  int64_t nextSecretSeq = 1;  // numbers the public ids of tokens of every kind

  // Derived state, rebuilt by `reindex` and kept current by Cluster.
  std::set<int64_t> queued;  // job ids in state queued; ids grow with submission, so FIFO order
  std::map<std::string, std::map<int, int64_t>> gpuHolders;  // host -> GPU index -> job id
  std::map<std::string, std::set<int64_t>> hostJobs;         // host -> its scheduled/running jobs
  // The last scheduling pass's word on each job still queued, in queue (= id) order, so a
  // lookup is a binary search and a pass refills it without allocating per job.
  std::vector<sched::Wait> waits;
  std::map<std::string, TeamQuotaStatus> quotaStatus;  // by team; written by the scheduling pass

  void load(const store::Contents& contents);
  void reindex();

  // Keeps the derived indexes right when a job changes; call with the job's old copy.
  void onJobChanged(const model::Job* before, const model::Job& after);

  static std::string projectKey(const std::string& team, const std::string& name) {
    return team + "/" + name;
  }
};

}  // namespace allot::control
