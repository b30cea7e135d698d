#pragma once
// One pass of the fleet scheduler (see fleet.h for the rules, in order). Internal to src/sched:
// decide() (fleet.h) is the only way in. The Pass's work, by concern:
//   fleet_pass.cc          validation, what runs, which kinds a request may use, the pass itself
//   fleet_pass_waits.cc    why a request waits: what the fleet lacks for it, leases, contours
//   fleet_pass_place.cc    placing a request: whole hosts, nodes and GPUs, contour limits
//   fleet_pass_reserve.cc  reservations for blocked requests, and backfill around them
//   fleet_pass_lend.cc     taking back a team's dedicated capacity lent to others
//   fleet_pass_quota.cc    the bridge to the quota policy (its snapshot, the model it admits on)

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "sched/fleet.h"
#include "sched/fleet_segments.h"
#include "sched/placement/policy.h"
#include "sched/quota/quota.h"

namespace allot::sched::fleet_pass {

namespace pl = placement;
namespace q = quota;

constexpr TimeMs kNever = std::numeric_limits<TimeMs>::max();
// A borrow limit of "none", in milli-GPUs: more than any fleet has, with room to add to it.
constexpr int kUnlimited = std::numeric_limits<int>::max() / 4;

enum class Phase { kOwn, kPool, kLent };

struct Reservation {
  int64_t jobId = 0;
  int node = -1;
  TimeMs startAt = 0;  // 0: unknown
  pl::Task block;      // the free GPUs it holds
  uint32_t blockGpus = 0;
};

// Per request, what the pass learned about it.
struct Item {
  const Request* r = nullptr;
  int rank = 0;  // queue order: priority, then submission
  bool placed = false;
  std::optional<Wait> wait;
  int wholeHostNode = -1;  // whole host: the idle node picked for it
  // impossible() at the start of the pass: it could not run even on an empty fleet. It reads
  // capacities only, which a pass never changes, so the answer holds all pass long.
  bool neverFits = false;
  // quotaModel() when no whole host was picked for it; the same all pass long, asked of it
  // several times. First asked in run()'s workload loop, before anything is placed, for every
  // request that later reaches quota (see quotaModel()).
  std::optional<std::string> quotaModel;
};

inline bool fractional(const Request& r) { return r.gpuMilli < kMilliPerGpu && r.gpus > 0; }
inline bool cpuOnly(const Request& r) { return r.gpus == 0 && !r.wholeHost; }

class Pass {
 public:
  Pass(const Snapshot& s, fleet::Fleet& f) : s_(s), f_(f), st_(f.state()) {}
  Result<Decisions> run();

 private:
  Status validate() const;
  void applyRunning();
  // `ignoreHolds`: as if no host were held for a lease (to tell a lease's hold from other
  // obstacles).
  // `ignoreContour`: as if the request might run in any contour (to tell its contour from other
  // obstacles).
  pl::ModelSet mask(const Request& r, Phase phase, const std::string& model = "",
                    bool ignoreHolds = false, bool ignoreContour = false) const;
  pl::ModelSet visibleMask(const Request& r, bool ignoreContour = false) const {
    return mask(r, Phase::kOwn, "", false, ignoreContour) |
           mask(r, Phase::kPool, "", false, ignoreContour) |
           mask(r, Phase::kLent, "", false, ignoreContour);
  }
  pl::Task taskFor(const Request& r, const pl::ModelSet& allowed) const;
  // The kinds of a GPU model (none for a model no host has).
  const pl::ModelSet& kindsOf(const std::string& model) const {
    static const pl::ModelSet kNone;
    auto it = kindsOfModel_.find(model);
    return it == kindsOfModel_.end() ? kNone : it->second;
  }
  bool kindAllowed(int node, const pl::ModelSet& allowed) const {
    return allowed.contains(f_.kindModel(f_.segments()[node].kind));
  }
  // Every change to the placement state goes through these, so cached answers know when they
  // are stale.
  // `freeAt`: when the GPUs taken come free again (kNever when nobody can say), for reservations.
  void take(const pl::Task& t, const pl::Choice& c, TimeMs freeAt) {
    st_.apply(t, c);
    ++version_;
    for (int g = 0; g < st_.numGpus(c.node); ++g) {
      if ((c.gpus >> g) & 1) gpuFreeAt_[c.node][g] = std::max(gpuFreeAt_[c.node][g], freeAt);
    }
  }
  TimeMs endOf(const Request& r) const {
    return r.maxRuntimeMs > 0 ? s_.now + r.maxRuntimeMs : kNever;
  }
  void giveBack(const pl::Task& t, const pl::Choice& c) {
    st_.release(t, c);
    ++version_;
  }
  std::optional<Wait> impossible(const Request& r);
  // Turns a "never fits" wait into kHostsDrained when hosts out of service could run `r`.
  void outOfServiceWait(const Request& r, Wait& w) const;
  // What impossible() says for the nodes of `visible` only.
  std::optional<Wait> impossibleIn(const Request& r, const pl::ModelSet& visible);
  // What the fleet offers a request's visibility and GPU count (see impossible()).
  struct Capacity {
    bool any = false;  // some segment it may use at all
    int largest = 0;   // the most GPUs (of the kinds it may use) on one segment
    // (CPU, memory) capacity -> distinct hosts with a segment that has enough GPUs
    std::map<std::pair<int64_t, int64_t>, int> bigEnough;
  };
  Capacity capacityFor(const Request& r, const pl::ModelSet& visible) const;
  // A request nothing may take: kNoSuchModel, or which version minimum rules the hosts out.
  void versionWait(const Request& r, Wait& w) const;
  bool anyNode(const pl::ModelSet& allowed) const;
  // A task that could not be placed in this pass: later requests that ask at least as much
  // (same kinds, GPUs, fraction and hosts; no less CPU and memory) cannot be placed either,
  // since a pass only ever takes capacity.
  bool failedBefore(const pl::Task& t, int hosts) const;
  void failed(const pl::Task& t, int hosts);
  void pickWholeHosts(std::vector<Item>& items);
  // Places the request with the tasks' mask; applies and records it. False when it does not fit.
  bool tryPlace(Item& it, const pl::ModelSet& allowed, PlacedBy by, const q::Admission* adm);
  int chooseCpuOnly(const pl::Task& t) const;
  // The first node of one of the request's preferred hosts with room for it; -1 when none.
  int preferredNode(const Request& r, const pl::Task& t) const;
  uint32_t pickGpus(int node, const pl::Task& t, uint32_t policyChoice) const;
  void record(Item& it, std::vector<Slice> slices, PlacedBy by, const q::Admission* adm,
              int64_t reservedFor = 0);
  bool tryBackfill(Item& it, const pl::Task& t);
  void reserve(Item& it, const pl::Task& t);
  void reclaimDedicated(Item& it);
  Wait unplacedWait(const Request& r, const pl::Task& t);
  // A request that would fit now on a host held for a lease, and that only the hold keeps off
  // it, waits for the lease (the hold starting soonest); nullopt otherwise.
  std::optional<Wait> heldWait(const Request& r) const;
  // A request with no room in its own contour that would fit now on hosts of another contour
  // waits for its contour (kNoHostInContour); nullopt otherwise.
  std::optional<Wait> contourWait(const Request& r) const;
  // GPUs (milli) a request takes when placed, for its team's contour limit.
  int64_t contourNeed(const Item& it) const;
  // Sets a kContourLimit wait and returns true when placing the request would take its team over
  // its limit in the request's contour.
  bool overContourLimit(Item& it);
  Wait unplacedWaitUncached(const Request& r, const pl::Task& t) const;
  q::QuotaSnapshot quotaSnapshot(const std::vector<Item*>& forQuota);
  std::string quotaModel(const Request& r, Item& it);
  std::string quotaModelUncached(const Request& r);

  const Snapshot& s_;
  fleet::Fleet& f_;
  pl::ClusterState& st_;
  std::unique_ptr<pl::PlacementPolicy> policy_;
  std::map<std::string, const TeamView*> teams_;
  std::set<std::string> lenders_;  // teams lending dedicated capacity
  std::vector<int64_t> kindMinGpuMemory_;
  // What every request's waits ask of the fleet's kinds, answered once per pass: whether any kind
  // is held for a lease, and the kinds' contours (heldWait, contourWait).
  bool anyHeld_ = false;
  std::set<std::string> contours_;
  std::map<std::string, pl::ModelSet> kindsOfModel_;  // GPU model -> its kinds' ids
  // Per (pool kinds, GPUs): the pool models, and the free milli at the start of the pass of the
  // segments with that many GPUs, by (model, CPU capacity, memory capacity) (see quotaModel).
  struct ModelRoom {
    std::set<std::string> models;
    std::map<std::tuple<std::string, int64_t, int64_t>, int64_t> free;
  };
  std::map<std::tuple<pl::ModelSet, int>, ModelRoom> modelRoom_;
  std::vector<std::vector<int>> runningOnNode_;  // node -> indices into s_.running
  std::vector<std::vector<TimeMs>> gpuFreeAt_;   // node -> GPU -> when it is free (kNever)
  std::map<std::pair<std::string, std::string>, int64_t> projectUsage_;  // pool milli
  std::map<std::tuple<pl::ModelSet, int, int, int>, std::vector<std::pair<int64_t, int64_t>>>
      failedShapes_;
  // A deep queue repeats a few shapes: what the fleet lacks for a shape, and how a shape waits in
  // the current state, are worked out once per shape (and state version), not once per request.
  uint64_t version_ = 0;
  std::map<std::tuple<pl::ModelSet, bool, bool, int>, Capacity> capacityCache_;
  std::map<std::tuple<pl::ModelSet, int64_t, int64_t, int, int, int, bool>,
           std::pair<uint64_t, Wait>>
      unplacedCache_;
  std::vector<Reservation> reservations_;
  std::set<int> wholeHostTaken_;
  std::map<int64_t, const RunningJob*> running_;
  std::set<int64_t> evicted_;                        // chosen as victims in this pass
  std::map<std::string, std::vector<int>> lentOut_;  // team -> its segments others hold GPUs on
  // (team, contour) -> milli-GPUs its work holds there, running and placed in this pass.
  std::map<std::pair<std::string, std::string>, int64_t> contourUsed_;
  Decisions out_;
  bool leaving(const RunningJob& j) const { return j.evicting || evicted_.count(j.id) > 0; }
};

}  // namespace allot::sched::fleet_pass
