#pragma once
// Quota policy: team guarantees, borrowing and lending limits, fair share and preemption.
//
// A pure function from a snapshot (teams, cluster capacity, running allocations, pending
// requests, `now`) to decisions: which requests quota allows to be placed now and in what order,
// which running allocations to reclaim and why, and an honest reason for every request that
// waits. No I/O, no clock reads, no randomness: the same snapshot gives the same decisions, byte
// for byte. It decides only "may this team use this many GPUs of this model now"; which host and
// which GPUs is the placement policy's job (sched/placement). Callable from any thread; it holds
// no state.
//
// The model
// - Capacity is counted in whole GPUs per GPU model. A team's guarantee is a number of GPUs per
//   model, plus optionally a number usable on any model (key kAnyModel). Specific guarantees on a
//   model may not exceed that model's capacity, and all guarantees together may not exceed the
//   cluster; what is left over is *unowned* capacity, which anyone may borrow.
// - Within-guarantee vs borrowed. A team's running allocations are walked oldest first (start
//   time, then job id). Each allocation's GPUs are counted against the team's remaining guarantee
//   for its model first, then against its any-model guarantee; whatever does not fit is
//   *borrowed*. An allocation is *reclaimable* only when all of its GPUs are borrowed: work that is
//   even partly within its owner's guarantee is never preempted.
// - Borrowing and lending are counted in GPUs across models. A team may have at most
//   `borrowLimit` borrowed GPUs. A team T lends min(lendLimit, guarantee - within-guarantee
//   usage) of its idle guarantee. Borrowed GPUs are backed first by unowned capacity, then by
//   lenders; a team never lends to itself. Borrowing is feasible when the total borrowed fits in
//   unowned + lendable, and each team's borrowed fits in unowned + what the *other* teams lend
//   (with only self-lending excluded, these two conditions are exactly Hall's condition, so a
//   valid assignment of borrowers to lenders exists; it is not materialised).
// - Fair share. A borrowing team's share is (GPUs it holds now + decayed history / window) /
//   weight, where history is decayed GPU-seconds (see advanceUsage) and window is
//   QuotaPolicy::shareWindowMs, which turns history into an average number of GPUs. Borrowing
//   requests are served by progressive filling: the team with the lowest share goes next, its
//   share is updated by what it got, and so on; so idle capacity is split by weight within a pass,
//   and over passes a team that used a lot recently goes after one that did not.
// - Preemption. A request that fits within its team's remaining guarantee is admitted first. If
//   the model's free GPUs are not enough, or admitting it takes back idle guarantee that borrowers
//   were using, the policy reclaims borrowed allocations: fewest victims, then fewest GPUs, then
//   lowest priority and most recently started. Victims get a grace period (the caller signals
//   them and marks them `evicting` in later snapshots); the request waits for them, and the GPUs
//   it needs are held for it meanwhile. Borrowing requests never cause preemption.
// - Known limit: a within-guarantee request can find its model full of other teams' any-model
//   guaranteed work, which is never reclaimed; it then waits with kGuaranteeInUse.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace allot::sched::quota {

// The key of a team's any-model guarantee, and a request's model when any model will do (the same
// convention as a fleet request with no models, sched::Request::models).
inline const std::string kAnyModel;

struct Team {
  std::string name;
  std::map<std::string, int> guaranteed;  // model (or kAnyModel) -> GPUs
  int borrowLimit = 0;                    // most GPUs it may use beyond its guarantee
  int lendLimit = 0;                      // most of its idle guarantee others may use
  double weight = 1.0;                    // > 0
  double usageGpuSeconds = 0;             // decayed history, excluding running allocations
};

struct Allocation {
  int64_t jobId = 0;
  std::string team;
  std::string model;  // the model it runs on; never kAnyModel
  int gpus = 0;
  int priority = 0;  // higher runs first; lower is preempted first
  bool preemptible = false;
  TimeMs startedAt = 0;
  // Already chosen as a victim and signalled; it is leaving. Its GPUs are still in use, but it no
  // longer counts towards its team's quota, and a within-guarantee request may wait for them.
  bool evicting = false;
};

struct Request {
  int64_t jobId = 0;
  std::string team;
  std::string model;  // kAnyModel: any model
  int gpus = 0;
  int priority = 0;
  TimeMs submittedAt = 0;
};

struct QuotaPolicy {
  TimeMs shareWindowMs = 3'600'000;  // > 0; turns history GPU-seconds into average GPUs
  // Victim search is exact (all combinations, smallest first) up to this many candidate sets;
  // beyond it, a greedy choice in preference order, so a pass stays bounded on a huge fleet.
  int64_t maxVictimSets = 100'000;
};

struct QuotaSnapshot {
  TimeMs now = 0;
  std::vector<Team> teams;
  std::map<std::string, int> capacity;  // model -> GPUs in the cluster (schedulable)
  std::vector<Allocation> running;
  std::vector<Request> pending;
  QuotaPolicy policy;
};

struct Admission {
  int64_t jobId = 0;
  std::string model;     // the model quota reserved it on (resolved when the request said any)
  int withinGpus = 0;    // GPUs counted within the team's guarantee
  int borrowedGpus = 0;  // GPUs borrowed from unowned capacity or lenders
};

struct Victim {
  int64_t jobId = 0;
  std::string team;
  std::string model;
  int gpus = 0;
  bool preemptible = false;  // requeue when true; otherwise stop with `reason` recorded
  int64_t forJob = 0;
  std::string forTeam;
  std::string reason;  // "reclaimed by team ml for job 42"
};

enum class WaitReason {
  kUnknownModel,       // the cluster has no GPUs of that model
  kExceedsCapacity,    // the cluster has fewer GPUs of that model than asked, in total
  kOverQuota,          // the team is at its guarantee and its borrow limit is reached
  kNoFreeGpus,         // quota allows it, but the GPUs are in use and it may not preempt
  kWaitingForLenders,  // quota allows the borrow limit, but unowned + lendable capacity is used
  kWaitingForGrace,    // within guarantee; waits for reclaimed allocations to leave
  kGuaranteeInUse,     // within guarantee, but the GPUs are held by others' within-guarantee work
};

const char* waitReasonName(WaitReason reason);

struct QuotaWait {
  int64_t jobId = 0;
  WaitReason reason = WaitReason::kNoFreeGpus;
  std::vector<int64_t> waitingFor;  // kWaitingForGrace: the allocations it waits for
};

// "team ml is at its guarantee (8) and borrow limit (4)", ...: words for a wait, on demand.
std::string describeWait(const QuotaWait& wait, const Request& request);

// A team's quota position after the pass (victims and evicting allocations gone, admissions and
// requests waiting for grace counted): what the API shows and what tests check invariants on.
struct TeamLedger {
  std::string team;
  int guaranteed = 0;  // all models together
  int withinGpus = 0;
  int borrowedGpus = 0;
  int lendable = 0;  // min(lendLimit, guaranteed - withinGpus)
  double share = 0;  // fair share key at the end of the pass
};

struct QuotaDecisions {
  std::vector<Admission> admissions;  // in the order they should be placed
  std::vector<Victim> victims;        // in the order chosen
  std::vector<QuotaWait> waits;       // every request not admitted, in priority order
  std::vector<TeamLedger> ledger;     // one per team, in name order
  int unownedGpus = 0;                // capacity not guaranteed to anyone
};

// Validates the snapshot (InvalidArgument on unknown teams, negative sizes, duplicate ids,
// guarantees beyond capacity, weight <= 0) and decides one pass.
Result<QuotaDecisions> decideQuota(const QuotaSnapshot& snapshot);

// Usage history. decayUsage: what `previousGpuSeconds` is worth after `elapsedMs` with the given
// half-life. advanceUsage: the same, plus `gpus` held throughout the interval, each instant decayed
// from when it was used (the exact integral, so the result does not depend on how often it is
// called). halfLifeMs <= 0 means no memory (both return 0); elapsedMs < 0 is treated as 0.
double decayUsage(double previousGpuSeconds, TimeMs elapsedMs, TimeMs halfLifeMs);
double advanceUsage(double previousGpuSeconds, int gpus, TimeMs elapsedMs, TimeMs halfLifeMs);

}  // namespace allot::sched::quota
