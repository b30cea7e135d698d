// One pass of the fleet scheduler (see fleet.h for the rules, in order).

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

namespace allot::sched {
namespace {

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
};

bool fractional(const Request& r) { return r.gpuMilli < kMilliPerGpu && r.gpus > 0; }
bool cpuOnly(const Request& r) { return r.gpus == 0 && !r.wholeHost; }

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
  std::string quotaModel(const Request& r, const Item& it);

  const Snapshot& s_;
  fleet::Fleet& f_;
  pl::ClusterState& st_;
  std::unique_ptr<pl::PlacementPolicy> policy_;
  std::map<std::string, const TeamView*> teams_;
  std::set<std::string> lenders_;  // teams lending dedicated capacity
  std::vector<int64_t> kindMinGpuMemory_;
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

Status Pass::validate() const {
  std::set<int64_t> ids;
  auto checkTeam = [&](const std::string& team, int64_t id) -> Status {
    if (!teams_.count(team))
      return Status::InvalidArgument("job " + std::to_string(id) + ": unknown team '" + team + "'",
                                     "team");
    if (!ids.insert(id).second)
      return Status::InvalidArgument("job " + std::to_string(id) + " appears twice", "id");
    return Status::Ok();
  };
  for (const auto& j : s_.running) ALLOT_RETURN_IF_ERROR(checkTeam(j.team, j.id));
  for (const auto& r : s_.pending) {
    ALLOT_RETURN_IF_ERROR(checkTeam(r.team, r.id));
    auto bad = [&](const char* what, const char* field) {
      return Status::InvalidArgument("job " + std::to_string(r.id) + ": " + what, field);
    };
    if (r.gpus < 0) return bad("gpus must be >= 0", "gpus");  // too many waits as too big
    if (r.gpuMilli <= 0 || r.gpuMilli > kMilliPerGpu)
      return bad("gpuMilli out of range", "gpuMilli");
    if (r.gpuMilli < kMilliPerGpu && r.gpus != 1)
      return bad("a fraction needs gpus == 1", "gpuMilli");
    if (r.hosts < 1) return bad("hosts must be >= 1", "hosts");
    if (r.cpuMillis < 0 || r.memoryMib < 0 || r.gpuMemoryMib < 0)
      return bad("negative resources", "cpuMillis");
  }
  for (const auto& t : s_.teams) {
    if (!(t.weight > 0) || !std::isfinite(t.weight))
      return Status::InvalidArgument("team '" + t.name + "' has weight <= 0", "weight");
  }
  return Status::Ok();
}

void Pass::applyRunning() {
  const int nodes = st_.size();
  runningOnNode_.assign(nodes, {});
  gpuFreeAt_.assign(nodes, {});
  for (int n = 0; n < nodes; ++n) gpuFreeAt_[n].assign(st_.numGpus(n), 0);
  for (size_t i = 0; i < s_.running.size(); ++i) {
    const RunningJob& j = s_.running[i];
    const TimeMs ends = j.endsBy > 0 ? j.endsBy : kNever;
    for (const Slice& sl : j.slices)
      contourUsed_[{j.team, j.contour}] +=
          int64_t{sl.gpuMilli} * static_cast<int64_t>(sl.gpus.size());
    for (const Slice& sl : j.slices) {
      for (int node : f_.applyRunning(sl)) {
        if (runningOnNode_[node].empty() || runningOnNode_[node].back() != static_cast<int>(i))
          runningOnNode_[node].push_back(static_cast<int>(i));
      }
      int host = f_.hostIndex(sl.host);
      if (host < 0) continue;
      for (int g : sl.gpus) {
        auto [node, local] = f_.locate(host, g);
        if (node < 0) continue;
        gpuFreeAt_[node][local] = std::max(gpuFreeAt_[node][local], ends);
        if (f_.kindOf(node).owner.empty()) {
          projectUsage_[{j.team, j.project}] += sl.gpuMilli;
        }
      }
    }
  }
}

pl::ModelSet Pass::mask(const Request& r, Phase phase, const std::string& model, bool ignoreHolds,
                        bool ignoreContour) const {
  if (!model.empty() && !cpuOnly(r))
    return mask(r, phase, "", ignoreHolds, ignoreContour) & kindsOf(model);
  pl::ModelSet m;
  const auto& kinds = f_.kinds();
  for (size_t k = 0; k < kinds.size(); ++k) {
    const fleet::Kind& kind = kinds[k];
    // PROD hosts run only PROD work, and so on for every contour.
    if (!ignoreContour && kind.contour != r.contour) continue;
    // A host held for a lease takes only work whose declared runtime ends before the lease
    // starts; work without one could still hold it then.
    if (!ignoreHolds && kind.heldFrom > 0 &&
        (r.maxRuntimeMs <= 0 || s_.now + r.maxRuntimeMs > kind.heldFrom))
      continue;
    switch (phase) {
      case Phase::kOwn:
        if (kind.owner != r.team) continue;
        break;
      case Phase::kPool:
        if (!kind.owner.empty()) continue;
        break;
      case Phase::kLent:
        if (kind.owner.empty() || kind.owner == r.team || !lenders_.count(kind.owner)) continue;
        break;
    }
    if (!cpuOnly(r)) {
      if (kind.model.empty()) continue;
      if (!r.models.empty() &&
          std::find(r.models.begin(), r.models.end(), kind.model) == r.models.end())
        continue;
      if (fractional(r) && !kind.shared) continue;
      if (!r.minDriver.empty() && !versionAtLeast(kind.driver, r.minDriver)) continue;
      if (!r.minCuda.empty() && !versionAtLeast(kind.cuda, r.minCuda)) continue;
      if (r.gpuMemoryMib > 0 && kindMinGpuMemory_[k] < r.gpuMemoryMib) continue;
    }
    m.insert(f_.kindModel(static_cast<int>(k)));
  }
  return m;
}

pl::Task Pass::taskFor(const Request& r, const pl::ModelSet& allowed) const {
  pl::Task t;
  t.cpuMilli = r.cpuMillis;
  t.memoryMib = r.memoryMib;
  t.numGpu = r.gpus;
  t.gpuMilli = kMilliPerGpu;
  t.allowedModels = allowed;
  if (fractional(r)) {
    // A fraction gets that fraction of the GPU's memory too, so asking for more memory than the
    // fraction carries raises the fraction (on the smallest GPU it may land on).
    int64_t milli = r.gpuMilli;
    if (r.gpuMemoryMib > 0) {
      int64_t smallest = 0;
      for (size_t k = 0; k < f_.kinds().size(); ++k) {
        if (!allowed.contains(f_.kindModel(static_cast<int>(k)))) continue;
        if (smallest == 0 || kindMinGpuMemory_[k] < smallest) smallest = kindMinGpuMemory_[k];
      }
      if (smallest > 0) milli = std::max(milli, (r.gpuMemoryMib * 1000 + smallest - 1) / smallest);
    }
    t.gpuMilli = static_cast<int>(std::min<int64_t>(milli, kMilliPerGpu));
  }
  if (r.wholeHost) t.numGpu = 0;
  return t;
}

std::optional<Wait> Pass::impossible(const Request& r) {
  auto w = impossibleIn(r, visibleMask(r));
  if (!w || st_.size() == 0) return w;
  switch (w->kind) {
    case WaitKind::kNoSuchModel:
    case WaitKind::kTooBig:
    case WaitKind::kDriverTooOld:
    case WaitKind::kCudaTooOld:
      break;
    default:
      return w;
  }
  // Its contour is all that stands in the way when hosts of other contours could take it.
  if (impossibleIn(r, visibleMask(r, /*ignoreContour=*/true))) return w;
  Wait c{r.id, WaitKind::kNoHostInContour};
  c.contour = r.contour;
  c.contourNever = true;
  c.largest = w->largest;
  return c;
}

std::optional<Wait> Pass::impossibleIn(const Request& r, const pl::ModelSet& visible) {
  Wait w;
  w.jobId = r.id;
  if (st_.size() == 0) {
    // "No host is online" would send people to check their agents when an admin drained them.
    const bool drained =
        std::any_of(s_.hosts.begin(), s_.hosts.end(), [](const HostView& h) { return h.drained; });
    w.kind = drained ? WaitKind::kHostsDrained : WaitKind::kNoHosts;
    return w;
  }
  if (cpuOnly(r)) return std::nullopt;
  // What the fleet offers this team for this many GPUs does not depend on the CPU and memory
  // asked, so it is summed up once per (visibility, GPUs) and each request compares against the
  // few distinct (CPU, memory) capacities: a deep queue costs a scan of the hosts per shape, not
  // per request.
  auto key = std::tuple(visible, r.wholeHost, fractional(r), r.gpus);
  auto it = capacityCache_.find(key);
  if (it == capacityCache_.end()) it = capacityCache_.emplace(key, capacityFor(r, visible)).first;
  const Capacity& cap = it->second;
  if (!cap.any) {
    versionWait(r, w);
    return w;
  }
  w.largest = cap.largest;
  if (!r.wholeHost && cap.largest < r.gpus) {
    w.kind = WaitKind::kTooBig;
    return w;
  }
  int hostsBig = 0;
  for (const auto& [cpuMem, hosts] : cap.bigEnough) {
    if (cpuMem.first >= r.cpuMillis && cpuMem.second >= r.memoryMib) hostsBig += hosts;
  }
  // Enough GPUs somewhere, but no such host also has the CPU and memory asked: never fits.
  if (!r.wholeHost && hostsBig == 0) {
    w.kind = WaitKind::kTooBig;
    w.cpuMemory = true;
    return w;
  }
  if (r.hosts > 1 && hostsBig < r.hosts) {
    w.kind = WaitKind::kTooBig;
    w.hostsReady = hostsBig;
    w.hostsWanted = r.hosts;
    return w;
  }
  return std::nullopt;
}

// Nothing the request may use fits: when hosts with the GPUs asked are there and only the version
// minimums rule them out, say which minimum and what the newest host offers, so that people know
// to ask less or to upgrade hosts ("no such model" would send them looking for GPUs).
void Pass::versionWait(const Request& r, Wait& w) const {
  w.kind = WaitKind::kNoSuchModel;
  if (r.minDriver.empty() && r.minCuda.empty()) return;
  Request any = r;
  any.minDriver.clear();
  any.minCuda.clear();
  Request driverOnly = any;
  driverOnly.minDriver = r.minDriver;
  const bool driverFails = !r.minDriver.empty() && !anyNode(visibleMask(driverOnly));
  // Newest among the nodes that pass every other test (the driver, when CUDA is the problem).
  const pl::ModelSet candidates = visibleMask(driverFails ? any : driverOnly);
  if (!anyNode(candidates)) return;
  w.kind = driverFails ? WaitKind::kDriverTooOld : WaitKind::kCudaTooOld;
  for (int n = 0; n < st_.size(); ++n) {
    if (!kindAllowed(n, candidates)) continue;
    const fleet::Kind& k = f_.kinds()[f_.segments()[n].kind];
    const std::string& v = driverFails ? k.driver : k.cuda;
    if (!v.empty() && (w.newest.empty() || compareVersions(v, w.newest) > 0)) w.newest = v;
  }
}

bool Pass::anyNode(const pl::ModelSet& allowed) const {
  for (int n = 0; n < st_.size(); ++n)
    if (kindAllowed(n, allowed)) return true;
  return false;
}

Pass::Capacity Pass::capacityFor(const Request& r, const pl::ModelSet& visible) const {
  Capacity c;
  int lastHost = -1;
  for (int n = 0; n < st_.size(); ++n) {
    if (!kindAllowed(n, visible)) continue;
    c.any = true;
    int gpus = r.wholeHost ? st_.numGpus(n) : (fractional(r) ? 1 : st_.numGpus(n));
    c.largest = std::max(c.largest, gpus);
    // A host's segments are consecutive, so counting changes of host counts distinct hosts.
    const int host = f_.segments()[n].host;
    if (host != lastHost && gpus >= r.gpus) {
      ++c.bigEnough[{st_.cpuCap(n), st_.memCap(n)}];
      lastHost = host;
    }
  }
  return c;
}

// Whole-host requests, in queue order, each get an idle single-segment host: their own dedicated
// first, then the pool, then lent capacity; the fewest GPUs first.
void Pass::pickWholeHosts(std::vector<Item>& items) {
  for (Item& it : items) {
    const Request& r = *it.r;
    if (!r.wholeHost || it.wait) continue;
    std::tuple<int, int, int> best{3, 0, 0};
    const pl::ModelSet own = mask(r, Phase::kOwn), pool = mask(r, Phase::kPool),
                       lent = mask(r, Phase::kLent);
    for (int n = 0; n < st_.size(); ++n) {
      const int host = f_.segments()[n].host;
      if (!f_.hasOneSegment(host) || wholeHostTaken_.count(n) || st_.numGpus(n) == 0) continue;
      if (st_.fullFreeGpus(n) != st_.numGpus(n) || st_.cpuFree(n) != st_.cpuCap(n) ||
          st_.memFree(n) != st_.memCap(n))
        continue;
      int phase = kindAllowed(n, own) ? 0 : kindAllowed(n, pool) ? 1 : kindAllowed(n, lent) ? 2 : 3;
      std::tuple<int, int, int> key{phase, st_.numGpus(n), n};
      if (phase < 3 && key < best) best = key;
    }
    if (std::get<0>(best) == 3) {
      it.wait = Wait{r.id, WaitKind::kNoIdleHost};
      continue;
    }
    it.wholeHostNode = std::get<2>(best);
    wholeHostTaken_.insert(it.wholeHostNode);
  }
}

int Pass::preferredNode(const Request& r, const pl::Task& t) const {
  if (r.preferHosts.empty() || r.hosts != 1) return -1;
  for (int n = 0; n < st_.size(); ++n) {
    const std::string& host = f_.hostOf(n).name;
    if (kindAllowed(n, t.allowedModels) && st_.fits(n, t) &&
        std::find(r.preferHosts.begin(), r.preferHosts.end(), host) != r.preferHosts.end())
      return n;
  }
  return -1;
}

int Pass::chooseCpuOnly(const pl::Task& t) const {
  // Best fit on CPU: the node left with the smallest share of its CPU free.
  int best = -1;
  double bestLeft = 2;
  for (int n = 0; n < st_.size(); ++n) {
    if (!kindAllowed(n, t.allowedModels) || !st_.fits(n, t)) continue;
    double left =
        st_.cpuCap(n) > 0 ? double(st_.cpuFree(n) - t.cpuMilli) / double(st_.cpuCap(n)) : 1.0;
    if (left < bestLeft) {
      best = n;
      bestLeft = left;
    }
  }
  return best;
}

// For a multi-GPU request, the free GPUs that sit closest together: the smallest NVLink domain
// with room, else PCIe switch, else NUMA node; otherwise the policy's choice stands.
uint32_t Pass::pickGpus(int node, const pl::Task& t, uint32_t policyChoice) const {
  if (t.shared() || t.numGpu < 2) return policyChoice;
  const auto& gpus = f_.segments()[node].gpus;
  using Key = int GpuView::*;
  for (Key key : {&GpuView::nvlinkDomain, &GpuView::pcieSwitch, &GpuView::numaNode}) {
    std::map<int, std::pair<int, uint32_t>> groups;  // domain -> (size, free GPUs)
    for (int g = 0; g < static_cast<int>(gpus.size()); ++g) {
      int d = gpus[g]->*key;
      if (d < 0) continue;
      groups[d].first++;
      if (st_.gpuFits(node, g, t)) groups[d].second |= uint32_t{1} << g;
    }
    int bestSize = std::numeric_limits<int>::max();
    uint32_t best = 0;
    for (const auto& [d, g] : groups) {
      if (std::popcount(g.second) < t.numGpu || g.first >= bestSize) continue;
      bestSize = g.first;
      uint32_t pick = 0, left = g.second;
      for (int k = 0; k < t.numGpu; ++k) {
        uint32_t low = left & (~left + 1);
        pick |= low;
        left &= ~low;
      }
      best = pick;
    }
    if (best != 0) return best;
  }
  return policyChoice;
}

void Pass::record(Item& it, std::vector<Slice> slices, PlacedBy by, const q::Admission* adm,
                  int64_t reservedFor) {
  Placement p;
  p.jobId = it.r->id;
  p.slices = std::move(slices);
  p.by = by;
  if (adm) {
    p.withinMilli = adm->withinGpus;
    p.borrowedMilli = adm->borrowedGpus;
  }
  p.reservedFor = reservedFor;
  for (const Slice& sl : p.slices)
    contourUsed_[{it.r->team, it.r->contour}] +=
        int64_t{sl.gpuMilli} * static_cast<int64_t>(sl.gpus.size());
  it.placed = true;
  it.wait.reset();
  out_.placements.push_back(std::move(p));
}

bool Pass::tryPlace(Item& it, const pl::ModelSet& allowed, PlacedBy by, const q::Admission* adm) {
  const Request& r = *it.r;
  if (allowed.empty()) return false;
  pl::Task t = taskFor(r, allowed);
  if (r.wholeHost) {
    int n = it.wholeHostNode;
    if (n < 0 || !kindAllowed(n, allowed)) return false;
    t.numGpu = st_.numGpus(n);
    t.cpuMilli = st_.cpuFree(n);
    t.memoryMib = st_.memFree(n);
    if (!st_.fits(n, t) || st_.fullFreeGpus(n) != st_.numGpus(n) ||
        st_.cpuFree(n) != st_.cpuCap(n) || st_.memFree(n) != st_.memCap(n))
      return false;
    uint32_t all = st_.firstGpus(n, t);
    take(t, {n, all}, endOf(r));
    record(it, {f_.toSlice(n, all, t)}, by, adm);
    return true;
  }
  if (failedBefore(t, r.hosts)) return false;
  const int preferred = preferredNode(r, t);
  if (cpuOnly(r)) {
    int n = preferred >= 0 ? preferred : chooseCpuOnly(t);
    if (n < 0) {
      failed(t, r.hosts);
      return false;
    }
    take(t, {n, 0}, endOf(r));
    record(it, {f_.toSlice(n, 0, t)}, by, adm);
    return true;
  }
  if (r.hosts == 1) {
    pl::Choice c = preferred >= 0 ? pl::Choice{preferred, st_.firstGpus(preferred, t)}
                                  : policy_->choose(st_, t);
    if (!c.ok()) {
      failed(t, r.hosts);
      return false;
    }
    c.gpus = pickGpus(c.node, t, c.gpus);
    take(t, c, endOf(r));
    record(it, {f_.toSlice(c.node, c.gpus, t)}, by, adm);
    return true;
  }
  // A gang: every rank on a distinct host, all of one GPU model, or none at all. Ranks on
  // distinct hosts do not compete, so enough distinct hosts with room means all ranks fit.
  std::map<std::string, std::set<int>> hostsByModel;
  for (int n = 0; n < st_.size(); ++n) {
    if (kindAllowed(n, allowed) && st_.fits(n, t))
      hostsByModel[f_.kindOf(n).model].insert(f_.segments()[n].host);
  }
  std::string model;
  size_t most = 0;
  for (const auto& [m, hosts] : hostsByModel) {
    if (hosts.size() > most) {
      most = hosts.size();
      model = m;
    }
  }
  if (static_cast<int>(most) < r.hosts) {
    failed(t, r.hosts);
    return false;
  }
  pl::ModelSet modelMask;
  for (size_t k = 0; k < f_.kinds().size(); ++k) {
    if (f_.kinds()[k].model == model) modelMask.insert(f_.kindModel(static_cast<int>(k)));
  }
  t.allowedModels &= modelMask;
  std::set<int> usedHosts;
  std::vector<Slice> slices;
  for (int rank = 0; rank < r.hosts; ++rank) {
    pl::Choice c = policy_->choose(st_, t);
    if (!c.ok() || usedHosts.count(f_.segments()[c.node].host)) {
      c = {};
      for (int n = 0; n < st_.size() && !c.ok(); ++n) {
        if (kindAllowed(n, t.allowedModels) && st_.fits(n, t) &&
            !usedHosts.count(f_.segments()[n].host))
          c = {n, st_.firstGpus(n, t)};
      }
    }
    c.gpus = pickGpus(c.node, t, c.gpus);
    take(t, c, endOf(r));
    usedHosts.insert(f_.segments()[c.node].host);
    slices.push_back(f_.toSlice(c.node, c.gpus, t));
  }
  record(it, std::move(slices), by, adm);
  return true;
}

bool Pass::failedBefore(const pl::Task& t, int hosts) const {
  auto it = failedShapes_.find(std::tuple(t.allowedModels, t.numGpu, t.gpuMilli, hosts));
  if (it == failedShapes_.end()) return false;
  for (const auto& [cpu, mem] : it->second) {
    if (cpu <= t.cpuMilli && mem <= t.memoryMib) return true;
  }
  return false;
}

void Pass::failed(const pl::Task& t, int hosts) {
  auto& points = failedShapes_[std::tuple(t.allowedModels, t.numGpu, t.gpuMilli, hosts)];
  // Keep only the smallest asks: one that asks no less than another adds nothing.
  std::erase_if(points,
                [&](const auto& p) { return p.first >= t.cpuMilli && p.second >= t.memoryMib; });
  points.emplace_back(t.cpuMilli, t.memoryMib);
}

std::optional<Wait> Pass::heldWait(const Request& r) const {
  if (cpuOnly(r) || r.hosts != 1) return std::nullopt;
  const pl::ModelSet unheld = mask(r, Phase::kOwn, "", true) | mask(r, Phase::kPool, "", true) |
                              mask(r, Phase::kLent, "", true);
  const pl::ModelSet heldOnly = unheld - visibleMask(r);
  if (heldOnly.empty()) return std::nullopt;
  const pl::Task t = taskFor(r, heldOnly);
  int best = -1;
  for (int n = 0; n < st_.size(); ++n) {
    if (!kindAllowed(n, heldOnly)) continue;
    const bool fits = r.wholeHost
                          ? f_.hasOneSegment(f_.segments()[n].host) &&
                                st_.fullFreeGpus(n) == st_.numGpus(n) &&
                                st_.cpuFree(n) == st_.cpuCap(n) && st_.memFree(n) == st_.memCap(n)
                          : st_.fits(n, t);
    if (fits && (best < 0 || f_.kindOf(n).heldFrom < f_.kindOf(best).heldFrom)) best = n;
  }
  if (best < 0) return std::nullopt;
  Wait w{r.id, WaitKind::kHeldForLease};
  w.host = f_.hostOf(best).name;
  w.startAt = f_.kindOf(best).heldFrom;
  w.lease = f_.kindOf(best).heldLease;
  return w;
}

std::optional<Wait> Pass::contourWait(const Request& r) const {
  const pl::ModelSet elsewhere = visibleMask(r, /*ignoreContour=*/true) - visibleMask(r);
  if (elsewhere.empty()) return std::nullopt;
  const pl::Task t = taskFor(r, elsewhere);
  std::set<int> hostsWithRoom;
  for (int n = 0; n < st_.size(); ++n) {
    if (!kindAllowed(n, elsewhere)) continue;
    const bool fits = r.wholeHost
                          ? f_.hasOneSegment(f_.segments()[n].host) && st_.numGpus(n) > 0 &&
                                st_.fullFreeGpus(n) == st_.numGpus(n) &&
                                st_.cpuFree(n) == st_.cpuCap(n) && st_.memFree(n) == st_.memCap(n)
                          : st_.fits(n, t);
    if (fits) hostsWithRoom.insert(f_.segments()[n].host);
  }
  if (static_cast<int>(hostsWithRoom.size()) < r.hosts) return std::nullopt;
  Wait w{r.id, WaitKind::kNoHostInContour};
  w.contour = r.contour;
  return w;
}

int64_t Pass::contourNeed(const Item& it) const {
  const Request& r = *it.r;
  if (r.wholeHost)
    return it.wholeHostNode >= 0 ? int64_t{st_.numGpus(it.wholeHostNode)} * kMilliPerGpu : 0;
  return int64_t{r.gpus} * r.gpuMilli * r.hosts;
}

bool Pass::overContourLimit(Item& it) {
  const Request& r = *it.r;
  const TeamView* team = teams_.at(r.team);
  auto limit = team->contourLimits.find(r.contour);
  if (limit == team->contourLimits.end()) return false;
  const int64_t need = contourNeed(it);
  if (need == 0) return false;  // CPU-only work holds no GPUs
  auto used = contourUsed_.find({r.team, r.contour});
  const int64_t held = used == contourUsed_.end() ? 0 : used->second;
  const int64_t limitMilli = int64_t{limit->second} * kMilliPerGpu;
  if (held + need <= limitMilli) return false;
  Wait w{r.id, WaitKind::kContourLimit};
  w.contour = r.contour;
  w.limitMilli = limitMilli;
  w.usedMilli = held;
  it.wait = w;
  return true;
}

// Room held for an earlier request may be used by one whose declared runtime ends before the
// reserved start.
bool Pass::tryBackfill(Item& it, const pl::Task& t) {
  const Request& r = *it.r;
  if (r.maxRuntimeMs <= 0 || r.hosts != 1 || cpuOnly(r) || r.wholeHost) return false;
  for (Reservation& res : reservations_) {
    if (res.startAt == 0 || s_.now + r.maxRuntimeMs > res.startAt) continue;
    if (!kindAllowed(res.node, t.allowedModels)) continue;
    if (res.blockGpus != 0) giveBack(res.block, {res.node, res.blockGpus});
    bool placed = false;
    if (st_.fits(res.node, t)) {
      uint32_t gpus = pickGpus(res.node, t, st_.firstGpus(res.node, t));
      take(t, {res.node, gpus}, endOf(r));
      record(it, {f_.toSlice(res.node, gpus, t)}, PlacedBy::kBackfill, nullptr, res.jobId);
      placed = true;
    }
    // Hold again whatever is still free of what it held.
    uint32_t still = 0;
    for (int g = 0; g < st_.numGpus(res.node); ++g) {
      if (((res.blockGpus >> g) & 1) && st_.gpuFree(res.node, g) == pl::kGpuMilli)
        still |= uint32_t{1} << g;
    }
    res.block.numGpu = std::popcount(still);
    res.blockGpus = still;
    if (still != 0) take(res.block, {res.node, still}, res.startAt == 0 ? kNever : res.startAt);
    if (placed) return true;
  }
  return false;
}

// An admitted request with no room now holds the segment where it can start soonest.
void Pass::reserve(Item& it, const pl::Task& t) {
  const Request& r = *it.r;
  if (r.hosts != 1 || t.shared() || r.wholeHost || cpuOnly(r) ||
      static_cast<int>(reservations_.size()) >= s_.policy.maxReservations)
    return;
  int bestNode = -1;
  std::tuple<TimeMs, int, int> best{kNever, 0, 0};
  for (int n = 0; n < st_.size(); ++n) {
    if (!kindAllowed(n, t.allowedModels) || st_.numGpus(n) < t.numGpu ||
        st_.cpuCap(n) < t.cpuMilli || st_.memCap(n) < t.memoryMib)
      continue;
    std::vector<TimeMs> at;
    for (int g = 0; g < st_.numGpus(n); ++g) {
      at.push_back(st_.gpuFree(n, g) == pl::kGpuMilli ? 0 : gpuFreeAt_[n][g]);
    }
    std::nth_element(at.begin(), at.begin() + (t.numGpu - 1), at.end());
    TimeMs start = at[t.numGpu - 1];
    std::tuple<TimeMs, int, int> key{start, -st_.fullFreeGpus(n), n};
    if (bestNode < 0 || key < best) {
      best = key;
      bestNode = n;
    }
  }
  if (bestNode < 0) return;
  Reservation res;
  res.jobId = r.id;
  res.node = bestNode;
  res.startAt = std::get<0>(best) == kNever ? 0 : std::get<0>(best);
  res.block.numGpu = 0;
  res.block.allowedModels = pl::kAnyModel;
  for (int g = 0; g < st_.numGpus(bestNode) && res.block.numGpu < t.numGpu; ++g) {
    if (st_.gpuFree(bestNode, g) == pl::kGpuMilli) {
      res.blockGpus |= uint32_t{1} << g;
      ++res.block.numGpu;
    }
  }
  if (res.blockGpus != 0) take(res.block, {bestNode, res.blockGpus}, std::get<0>(best));
  Wait w{r.id, WaitKind::kReserved};
  w.host = f_.hostOf(bestNode).name;
  w.startAt = res.startAt;
  it.wait = w;
  reservations_.push_back(res);
}

// An owner's request that finds its dedicated capacity used by borrowers takes it back: on the
// segment that needs the fewest victims (lowest priority and most recent first).
void Pass::reclaimDedicated(Item& it) {
  const Request& r = *it.r;
  const pl::ModelSet own = mask(r, Phase::kOwn);
  if (own.empty() || r.hosts != 1) return;
  if (r.wholeHost) return;
  // The team's segments that others hold GPUs on, found once per pass: most requests of a team
  // whose dedicated capacity is not lent out cost nothing here.
  auto cached = lentOut_.find(r.team);
  if (cached == lentOut_.end()) {
    std::vector<int> nodes;
    for (int n = 0; n < st_.size(); ++n) {
      if (f_.kindOf(n).owner != r.team) continue;
      for (int i : runningOnNode_[n]) {
        if (s_.running[i].team != r.team) {
          nodes.push_back(n);
          break;
        }
      }
    }
    cached = lentOut_.emplace(r.team, std::move(nodes)).first;
  }
  if (cached->second.empty()) return;
  pl::Task t = taskFor(r, own);
  std::vector<int64_t> bestVictims, bestLeaving;
  bool found = false;
  for (int n : cached->second) {
    if (!kindAllowed(n, own)) continue;
    // Borrowers: other teams' jobs holding GPUs of this segment (CPU or memory that merely
    // spilled over here from another segment of the host is not borrowing it).
    const int hostOfNode = f_.segments()[n].host;
    auto holdsGpuHere = [&](const RunningJob& j) {
      for (const Slice& sl : j.slices) {
        if (f_.hostIndex(sl.host) != hostOfNode) continue;
        for (int g : sl.gpus) {
          if (f_.locate(hostOfNode, g).first == n) return true;
        }
      }
      return false;
    };
    std::vector<int> lent;
    for (int i : runningOnNode_[n]) {
      if (s_.running[i].team != r.team && holdsGpuHere(s_.running[i])) lent.push_back(i);
    }
    if (lent.empty()) continue;
    std::sort(lent.begin(), lent.end(), [&](int a, int b) {
      const RunningJob& x = s_.running[a];
      const RunningJob& y = s_.running[b];
      return std::tuple(!leaving(x), x.priority, -x.startedAt, -x.id) <
             std::tuple(!leaving(y), y.priority, -y.startedAt, -y.id);
    });
    // Give back, one job at a time, what it holds on this node, until the request fits.
    std::vector<int> free(st_.numGpus(n));
    for (int g = 0; g < st_.numGpus(n); ++g) free[g] = st_.gpuFree(n, g);
    int64_t cpu = st_.cpuFree(n), mem = st_.memFree(n);
    auto fitsNow = [&] {
      if (cpu < t.cpuMilli || mem < t.memoryMib) return false;
      int whole = 0;
      for (int v : free) {
        if (t.shared() ? v >= t.gpuMilli : v == pl::kGpuMilli) ++whole;
      }
      return whole >= (t.shared() ? 1 : t.numGpu);
    };
    std::vector<int64_t> victims, leavingIds;
    const int host = f_.segments()[n].host;
    for (int i : lent) {
      if (fitsNow()) break;
      const RunningJob& j = s_.running[i];
      for (const Slice& sl : j.slices) {
        if (f_.hostIndex(sl.host) != host) continue;
        for (int g : sl.gpus) {
          auto [node, local] = f_.locate(host, g);
          if (node == n) free[local] = std::min(pl::kGpuMilli, free[local] + sl.gpuMilli);
        }
        cpu += sl.cpuMillis;
        mem += sl.memoryMib;
      }
      (leaving(j) ? leavingIds : victims).push_back(j.id);
    }
    if (!fitsNow()) continue;
    if (!found || victims.size() < bestVictims.size()) {
      found = true;
      bestVictims = victims;
      bestLeaving = leavingIds;
    }
  }
  if (!found) return;
  Wait w{r.id, WaitKind::kWaitingForGrace};
  for (int64_t id : bestVictims) {
    const RunningJob& j = *running_.at(id);
    out_.evictions.push_back({id, j.preemptible, r.id,
                              "reclaimed by team " + r.team + " (its dedicated capacity) for job " +
                                  std::to_string(r.id)});
    evicted_.insert(id);
    w.waitingFor.push_back(id);
  }
  for (int64_t id : bestLeaving) w.waitingFor.push_back(id);
  it.wait = w;
}

Wait Pass::unplacedWait(const Request& r, const pl::Task& t) {
  // A single-host GPU request's wait (free GPUs in total, the most on one host) does not depend on
  // its CPU and memory; a gang's and a CPU-only request's do.
  const bool byResources = r.hosts > 1 || cpuOnly(r);
  auto key = std::tuple(t.allowedModels, byResources ? t.cpuMilli : -1,
                        byResources ? t.memoryMib : -1, t.numGpu, t.gpuMilli, r.hosts, cpuOnly(r));
  auto it = unplacedCache_.find(key);
  if (it == unplacedCache_.end() || it->second.first != version_)
    it =
        unplacedCache_.insert_or_assign(key, std::pair(version_, unplacedWaitUncached(r, t))).first;
  Wait w = it->second.second;
  w.jobId = r.id;
  return w;
}

Wait Pass::unplacedWaitUncached(const Request& r, const pl::Task& t) const {
  Wait w{r.id, WaitKind::kFragmented};
  if (cpuOnly(r)) {
    w.kind = WaitKind::kNeedsOnlineHost;
    return w;
  }
  int hostsReady = 0, lastHost = -1;
  for (int n = 0; n < st_.size(); ++n) {
    if (!kindAllowed(n, t.allowedModels)) continue;
    w.freeTotal += st_.gpuFreeTotal(n);
    w.largest = std::max(
        w.largest, t.shared() ? (st_.maxFreeMilli(n) >= t.gpuMilli ? 1 : 0) : st_.fullFreeGpus(n));
    const int host = f_.segments()[n].host;
    if (host != lastHost && st_.fits(n, t)) {
      ++hostsReady;
      lastHost = host;
    }
  }
  if (r.hosts > 1) {
    w.kind = WaitKind::kGang;
    w.hostsReady = hostsReady;
    w.hostsWanted = r.hosts;
  } else if (w.freeTotal < t.gpuRequest() * r.hosts) {
    w.kind = WaitKind::kNoFreeGpus;
  }
  return w;
}

std::string Pass::quotaModel(const Request& r, const Item& it) {
  if (it.wholeHostNode >= 0) return f_.kindOf(it.wholeHostNode).model;
  if (r.models.size() == 1) return r.models.front();
  // Only models whose pool hosts could ever hold it (GPUs, CPU, memory) are candidates: quota
  // reserves GPUs on the model it is given and placement then keeps to it, so a model where it
  // never fits would leave it waiting forever (an 8-GPU task asking 120 CPUs fits only on the
  // hosts with 128). Among them, the one with the most free pool capacity at the start of the
  // pass. Worked out once per request shape: a deep queue repeats a few.
  // The per-node scan is done once per (pool kinds, GPUs); a request then sums the few distinct
  // (model, CPU, memory) capacities it fits.
  const pl::ModelSet pool = mask(r, Phase::kPool);
  auto key = std::tuple(pool, fractional(r) ? 1 : r.gpus);
  auto cached = modelRoom_.find(key);
  if (cached == modelRoom_.end()) {
    ModelRoom room;
    for (int n = 0; n < st_.size(); ++n) {
      if (!kindAllowed(n, pool)) continue;
      const std::string& m = f_.kindOf(n).model;
      room.models.insert(m);
      const int gpus = fractional(r) ? 1 : st_.numGpus(n);
      if (gpus >= r.gpus) room.free[{m, st_.cpuCap(n), st_.memCap(n)}] += st_.gpuFreeTotal(n);
    }
    cached = modelRoom_.emplace(key, std::move(room)).first;
  }
  std::map<std::string, int64_t> free;  // models that can hold it -> free milli
  for (const auto& [shape, milli] : cached->second.free) {
    const auto& [m, cpu, mem] = shape;
    if (cpu >= r.cpuMillis && mem >= r.memoryMib) free[m] += milli;
  }
  if (r.models.empty() && free.size() == cached->second.models.size()) return "";  // quota picks
  if (free.empty()) return r.models.empty() ? "" : r.models.front();
  std::string best;
  int64_t most = -1;
  auto consider = [&](const std::string& m) {
    auto itf = free.find(m);
    if (itf != free.end() && itf->second > most) {
      most = itf->second;
      best = m;
    }
  };
  if (r.models.empty()) {
    for (const auto& [m, v] : free) consider(m);
  } else {
    for (const auto& m : r.models) consider(m);
  }
  return best;
}

q::QuotaSnapshot Pass::quotaSnapshot(const std::vector<Item*>& forQuota) {
  q::QuotaSnapshot qs;
  qs.now = s_.now;
  qs.policy.shareWindowMs = s_.policy.shareWindowMs;
  // Pool capacity per model, in milli-GPUs.
  for (int n = 0; n < st_.size(); ++n) {
    const fleet::Kind& k = f_.kindOf(n);
    if (k.owner.empty() && !k.model.empty())
      qs.capacity[k.model] += int64_t{st_.numGpus(n)} * kMilliPerGpu;
  }
  int64_t capacityTotal = 0;
  for (const auto& [m, c] : qs.capacity) capacityTotal += c;
  // Guarantees beyond what the pool has now (hosts away, or quotas set ahead of hardware) are
  // scaled down in proportion, per model first, then overall.
  std::map<std::string, int64_t> specific;
  for (const auto& t : s_.teams) {
    for (const auto& [m, g] : t.guaranteed) {
      if (!m.empty()) specific[m] += int64_t{g} * kMilliPerGpu;
    }
  }
  auto scaled = [](int64_t v, int64_t num, int64_t den) {
    return den <= 0 ? int64_t{0} : v * num / den;
  };
  int64_t specificAfter = 0;
  for (const auto& t : s_.teams) {
    q::Team qt;
    qt.name = t.name;
    qt.weight = t.weight;
    qt.usageGpuSeconds = std::max(0.0, t.usageGpuSeconds) * kMilliPerGpu;
    for (const auto& [m, g] : t.guaranteed) {
      if (m.empty()) continue;
      int64_t v = int64_t{g} * kMilliPerGpu;
      int64_t cap = qs.capacity.count(m) ? qs.capacity.at(m) : 0;
      if (specific[m] > cap) v = scaled(v, cap, specific[m]);
      qt.guaranteed[m] = static_cast<int>(v);
      specificAfter += v;
    }
    out_.teams.push_back({t.name});
    qs.teams.push_back(std::move(qt));
  }
  int64_t anyTotal = 0;
  for (const auto& t : s_.teams) {
    auto it = t.guaranteed.find("");
    if (it != t.guaranteed.end()) anyTotal += int64_t{it->second} * kMilliPerGpu;
  }
  const int64_t anyRoom = std::max<int64_t>(0, capacityTotal - specificAfter);
  for (size_t i = 0; i < s_.teams.size(); ++i) {
    const TeamView& t = s_.teams[i];
    q::Team& qt = qs.teams[i];
    auto it = t.guaranteed.find("");
    if (it != t.guaranteed.end()) {
      int64_t v = int64_t{it->second} * kMilliPerGpu;
      if (anyTotal > anyRoom) v = scaled(v, anyRoom, anyTotal);
      qt.guaranteed[""] = static_cast<int>(v);
    }
    int64_t g = 0;
    for (const auto& [m, v] : qt.guaranteed) g += v;
    qt.borrowLimit =
        t.borrowLimit < 0
            ? kUnlimited
            : static_cast<int>(std::min<int64_t>(int64_t{t.borrowLimit} * 1000, INT32_MAX));
    qt.lendLimit = t.lendLimit < 0
                       ? static_cast<int>(g)
                       : static_cast<int>(std::min<int64_t>(int64_t{t.lendLimit} * 1000, g));
  }
  // Running work in the pool.
  for (const RunningJob& j : s_.running) {
    q::Allocation a;
    a.jobId = j.id;
    a.team = j.team;
    a.priority = j.priority;
    a.preemptible = j.preemptible;
    a.startedAt = j.startedAt;
    a.evicting = j.evicting;
    for (const Slice& sl : j.slices) {
      int host = f_.hostIndex(sl.host);
      if (host < 0) continue;
      for (int g : sl.gpus) {
        auto [node, local] = f_.locate(host, g);
        if (node < 0 || !f_.kindOf(node).owner.empty()) continue;
        if (a.model.empty()) a.model = f_.kindOf(node).model;
        a.gpus += sl.gpuMilli;
      }
    }
    if (a.gpus > 0) qs.running.push_back(std::move(a));
  }
  for (Item* it : forQuota) {
    const Request& r = *it->r;
    q::Request qr;
    qr.jobId = r.id;
    qr.team = r.team;
    qr.model = quotaModel(r, *it);
    int64_t milli = it->wholeHostNode >= 0
                        ? int64_t{st_.numGpus(it->wholeHostNode)} * kMilliPerGpu
                        : int64_t{r.gpus} * taskFor(r, mask(r, Phase::kPool)).gpuMilli * r.hosts;
    qr.gpus = static_cast<int>(std::min<int64_t>(milli, INT32_MAX));
    // Within a team, a project under its split of the guarantee goes first.
    bool underSplit = false;
    if (const TeamView* tv = teams_.at(r.team); tv->projectSplits.count(r.project)) {
      int64_t split = 0;
      for (const auto& [m, g] : tv->projectSplits.at(r.project)) split += int64_t{g} * 1000;
      auto used = projectUsage_.find({r.team, r.project});
      underSplit = (used == projectUsage_.end() ? 0 : used->second) < split;
    }
    qr.priority = r.priority * 2 + (underSplit ? 1 : 0);
    qr.submittedAt = r.submittedAt;
    qs.pending.push_back(std::move(qr));
  }
  return qs;
}

WaitKind fromQuota(q::WaitReason reason) {
  switch (reason) {
    case q::WaitReason::kUnknownModel:
      return WaitKind::kNoSuchModel;
    case q::WaitReason::kExceedsCapacity:
      return WaitKind::kTooBig;
    case q::WaitReason::kOverQuota:
      return WaitKind::kOverQuota;
    case q::WaitReason::kNoFreeGpus:
      return WaitKind::kNoFreeGpus;
    case q::WaitReason::kWaitingForLenders:
      return WaitKind::kWaitingForLenders;
    case q::WaitReason::kWaitingForGrace:
      return WaitKind::kWaitingForGrace;
    case q::WaitReason::kGuaranteeInUse:
      return WaitKind::kGuaranteeInUse;
  }
  return WaitKind::kNoFreeGpus;
}

Result<Decisions> Pass::run() {
  for (const auto& t : s_.teams) {
    if (!teams_.emplace(t.name, &t).second)
      return Status::InvalidArgument("team '" + t.name + "' appears twice", "teams");
    if (t.lendDedicated) lenders_.insert(t.name);
  }
  ALLOT_RETURN_IF_ERROR(validate());
  for (const auto& j : s_.running) running_[j.id] = &j;
  kindMinGpuMemory_.assign(f_.kinds().size(), std::numeric_limits<int64_t>::max());
  for (size_t k = 0; k < f_.kinds().size(); ++k)
    kindsOfModel_[f_.kinds()[k].model].insert(f_.kindModel(static_cast<int>(k)));
  for (const auto& seg : f_.segments()) {
    if (!seg.gpus.empty())
      kindMinGpuMemory_[seg.kind] = std::min(kindMinGpuMemory_[seg.kind], seg.gpuMemoryMib);
  }
  applyRunning();

  // Queue order: priority, then submission.
  std::vector<Item> items(s_.pending.size());
  for (size_t i = 0; i < items.size(); ++i) items[i].r = &s_.pending[i];
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return std::tuple(-int64_t{a.r->priority}, a.r->submittedAt, a.r->id) <
           std::tuple(-int64_t{b.r->priority}, b.r->submittedAt, b.r->id);
  });
  std::map<int64_t, Item*> byId;
  for (size_t i = 0; i < items.size(); ++i) {
    items[i].rank = static_cast<int>(i);
    byId[items[i].r->id] = &items[i];
  }

  std::set<std::string> poolModels;
  for (const auto& k : f_.kinds()) {
    if (k.owner.empty() && !k.model.empty()) poolModels.insert(k.model);
  }
  std::vector<pl::Task> workload;
  workload.reserve(items.size());
  for (Item& it : items) {
    it.wait = impossible(*it.r);
    // The placement policy's picture of the workload: each request as the pool will see it. An
    // any-model request is placed on the one model quota admits it on, so it appears once per
    // model (FGD caches by task type, and the type must be the one placed).
    if (it.wait || cpuOnly(*it.r)) continue;
    std::string model = quotaModel(*it.r, it);
    if (!model.empty()) {
      workload.push_back(taskFor(*it.r, mask(*it.r, Phase::kPool, model)));
    } else {
      // One scan of the kinds, then a set intersection per model (a fleet may have hundreds).
      const pl::ModelSet pool = mask(*it.r, Phase::kPool);
      for (const auto& m : poolModels) workload.push_back(taskFor(*it.r, pool & kindsOf(m)));
    }
  }
  // What runs is the workload too: with a short queue (the usual case in allotd) the queue alone
  // says little about the shapes to keep room for.
  for (const RunningJob& j : s_.running) {
    if (j.slices.empty() || j.slices.front().gpus.empty()) continue;
    const Slice& sl = j.slices.front();
    int host = f_.hostIndex(sl.host);
    if (host < 0) continue;
    auto [node, local] = f_.locate(host, sl.gpus.front());
    if (node < 0) continue;
    Request r;
    r.team = j.team;
    r.gpus = static_cast<int>(sl.gpus.size());
    r.gpuMilli = sl.gpuMilli;
    r.cpuMillis = sl.cpuMillis;
    r.memoryMib = sl.memoryMib;
    const std::string& model = f_.kindOf(node).model;
    r.models = {model};
    workload.push_back(taskFor(r, mask(r, Phase::kPool, model)));
  }
  auto policy = pl::makePolicy(s_.policy.placement, s_.policy.seed, workload);
  if (!policy.ok()) return policy.status();
  policy_ = std::move(*policy);
  pickWholeHosts(items);

  // 1. Dedicated capacity of the request's own team; CPU-only work anywhere it may go.
  std::vector<Item*> forQuota;
  for (Item& it : items) {
    if (it.wait) continue;
    const Request& r = *it.r;
    if (overContourLimit(it)) continue;
    if (cpuOnly(r)) {
      if (!tryPlace(it, mask(r, Phase::kOwn) | mask(r, Phase::kPool), PlacedBy::kQuota, nullptr))
        it.wait = unplacedWait(r, taskFor(r, visibleMask(r)));
      continue;
    }
    if (tryPlace(it, mask(r, Phase::kOwn), PlacedBy::kDedicated, nullptr)) continue;
    // Its own capacity, lent out to others, comes back before it queues for the pool.
    reclaimDedicated(it);
    if (it.wait) continue;
    if (!mask(r, Phase::kPool).empty() &&
        (!r.wholeHost || kindAllowed(it.wholeHostNode, mask(r, Phase::kPool))))
      forQuota.push_back(&it);
  }

  // 2. Quota over the pool, then placement in its order.
  q::QuotaSnapshot qs = quotaSnapshot(forQuota);
  auto qd = q::decideQuota(qs);
  if (!qd.ok()) return qd.status();
  for (const q::Victim& v : qd->victims) {
    // Quota counts over every contour; preempting work in another contour than the request's
    // would free GPUs it may not use, so such victims are spared.
    auto victim = running_.find(v.jobId);
    auto forJob = byId.find(v.forJob);
    if (victim != running_.end() && forJob != byId.end() &&
        victim->second->contour != forJob->second->r->contour)
      continue;
    out_.evictions.push_back({v.jobId, v.preemptible, v.forJob, v.reason});
    evicted_.insert(v.jobId);
  }
  // Placement in queue order: an admitted request is placed (or, fragmented, reserves room); one
  // that quota allows but that finds its GPUs in use reserves room too, so that later, smaller
  // work cannot starve it, except by backfilling before it starts.
  std::map<int64_t, const q::Admission*> admitted;
  for (const q::Admission& adm : qd->admissions) admitted[adm.jobId] = &adm;
  std::map<int64_t, const q::QuotaWait*> refused;
  for (const q::QuotaWait& w : qd->waits) refused[w.jobId] = &w;
  // Requests admitted (even partly) within their team's guarantee go first, then the rest, each
  // group in queue order: quota ranked the guaranteed ones ahead and may have reclaimed borrowed
  // work for them, so an earlier request that quota refused must not reserve the room they were
  // admitted to (it would sit idle: the refused one may not use it either).
  std::vector<Item*> placeOrder;
  placeOrder.reserve(forQuota.size());
  auto withinGuarantee = [&](const Item* it) {
    auto a = admitted.find(it->r->id);
    return a != admitted.end() && a->second->withinGpus > 0;
  };
  for (Item* itp : forQuota) {
    if (withinGuarantee(itp)) placeOrder.push_back(itp);
  }
  for (Item* itp : forQuota) {
    if (!withinGuarantee(itp)) placeOrder.push_back(itp);
  }
  for (Item* itp : placeOrder) {
    Item& it = *itp;
    const Request& r = *it.r;
    if (overContourLimit(it)) continue;
    if (auto a = admitted.find(r.id); a != admitted.end()) {
      const pl::ModelSet pool = mask(r, Phase::kPool, a->second->model);
      if (tryPlace(it, pool, PlacedBy::kQuota, a->second)) continue;
      pl::Task t = taskFor(r, pool);
      if (tryBackfill(it, t)) continue;
      it.wait = r.wholeHost ? Wait{r.id, WaitKind::kNoIdleHost} : unplacedWait(r, t);
      if (it.wait->kind == WaitKind::kFragmented || it.wait->kind == WaitKind::kNoFreeGpus)
        reserve(it, t);
      continue;
    }
    const q::QuotaWait& w = *refused.at(r.id);
    Wait wait{r.id, fromQuota(w.reason)};
    wait.waitingFor = w.waitingFor;
    if (wait.kind == WaitKind::kWaitingForGrace) {
      // Victims spared because they run in another contour are not worth waiting for.
      std::erase_if(wait.waitingFor, [&](int64_t id) {
        auto j = running_.find(id);
        return j == running_.end() || !leaving(*j->second);
      });
      if (wait.waitingFor.empty()) wait.kind = WaitKind::kNoFreeGpus;
    }
    it.wait = wait;
    if (wait.kind == WaitKind::kNoFreeGpus && !r.wholeHost) {
      pl::Task t = taskFor(r, mask(r, Phase::kPool, quotaModel(r, it)));
      it.wait = unplacedWait(r, t);
      reserve(it, t);
    }
  }
  for (size_t i = 0; i < qd->ledger.size(); ++i) {
    const q::TeamLedger& l = qd->ledger[i];
    for (auto& ts : out_.teams) {
      if (ts.team == l.team) {
        ts.guaranteedMilli = l.guaranteed;
        ts.withinMilli = l.withinGpus;
        ts.borrowedMilli = l.borrowedGpus;
        ts.lendableMilli = l.lendable;
        ts.share = l.share;
      }
    }
  }

  // 3. What is still unplaced may use capacity other teams dedicated and lend (owners took theirs
  // back in step 1).
  for (Item& it : items) {
    if (it.placed || cpuOnly(*it.r)) continue;
    if (it.wait &&
        (it.wait->kind == WaitKind::kWaitingForGrace || it.wait->kind == WaitKind::kReserved ||
         it.wait->kind == WaitKind::kContourLimit))
      continue;
    if (impossible(*it.r)) continue;
    if (overContourLimit(it)) continue;
    if (tryPlace(it, mask(*it.r, Phase::kLent), PlacedBy::kLentDedicated, nullptr)) continue;
    if (!it.wait) it.wait = unplacedWait(*it.r, taskFor(*it.r, visibleMask(*it.r)));
  }

  // Waits in queue order, numbered.
  int position = 0;
  for (Item& it : items) {
    if (it.placed) continue;
    Wait w = it.wait.value_or(Wait{it.r->id, WaitKind::kNoFreeGpus});
    // Room-shaped waits may really be a lease's hold: say so when the hold is all that stands
    // in the way (quota waits are about the team, not the hosts, and stay as they are).
    switch (w.kind) {
      case WaitKind::kNoSuchModel:
      case WaitKind::kTooBig:
      case WaitKind::kNoFreeGpus:
      case WaitKind::kFragmented:
      case WaitKind::kNoIdleHost:
      case WaitKind::kReserved:
        if (auto held = heldWait(*it.r)) {
          w = *held;
        } else if (auto contour = contourWait(*it.r)) {
          // A reservation in its own contour still stands; the words say why it waits.
          contour->host = w.kind == WaitKind::kReserved ? w.host : "";
          contour->startAt = w.kind == WaitKind::kReserved ? w.startAt : 0;
          w = *contour;
        }
        break;
      case WaitKind::kGang:
        if (auto contour = contourWait(*it.r)) w = *contour;
        break;
      default:
        break;
    }
    w.jobId = it.r->id;
    w.position = ++position;
    out_.waits.push_back(std::move(w));
  }
  return std::move(out_);
}

}  // namespace

Result<Decisions> decide(const Snapshot& snapshot) {
  auto fleet = fleet::Fleet::build(snapshot);
  if (!fleet.ok()) return fleet.status();
  return Pass(snapshot, *fleet).run();
}

}  // namespace allot::sched
