#include "sched/quota/quota.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

namespace allot::sched::quota {
namespace {

struct TeamState {
  const Team* team = nullptr;
  std::map<std::string, int> specificLeft;  // remaining specific guarantee per model
  int anyLeft = 0;
  int guaranteed = 0;
  int within = 0;
  int borrowed = 0;
  int held = 0;  // GPUs it holds now, for fair share

  int withinRoom(const std::string& model) const {
    auto it = specificLeft.find(model);
    return (it == specificLeft.end() ? 0 : it->second) + anyLeft;
  }
  int lendable() const { return std::max(0, std::min(team->lendLimit, guaranteed - within)); }
};

// What booking `within` GPUs on a model took, so a tentative booking can be undone exactly.
struct Booking {
  int specific = 0;
  int any = 0;
};

struct AllocState {
  const Allocation* a = nullptr;
  size_t team = 0;
  bool reclaimable = false;  // every GPU borrowed
  bool gone = false;         // evicting, or chosen as a victim in this pass
  bool claimed = false;      // evicting and already awaited by a request of this pass
};

// One decision pass over a snapshot. Built, run once, and dropped; it never outlives the
// snapshot it points into.
class Pass {
 public:
  explicit Pass(const QuotaSnapshot& s) : s_(s) {}
  QuotaDecisions run();

 private:
  size_t teamIndex(const std::string& name) const { return teamIdx_.at(name); }
  Booking book(TeamState& t, const std::string& model, int gpus);
  void unbook(TeamState& t, const std::string& model, const Booking& b);
  bool poolOk(const std::vector<size_t>& victims) const;
  std::optional<std::vector<size_t>> chooseVictims(const std::string& model, int need) const;
  bool victimsSuffice(const std::vector<size_t>& set, const std::string& model, int need) const;
  double share(const TeamState& t) const;
  void processWithin(const Request& r, const std::vector<const std::string*>& models);
  void processBorrow(const Request& r);
  // The models a request may be admitted on, in the order to try them; they point into the
  // request or the snapshot.
  std::vector<const std::string*> modelsFor(const Request& r) const;

  const QuotaSnapshot& s_;
  std::vector<TeamState> teams_;  // in name order
  std::map<std::string, size_t> teamIdx_;
  std::vector<AllocState> allocs_;
  std::map<std::string, int> free_;  // may be negative when allocations exceed capacity
  int unowned_ = 0;
  QuotaDecisions out_;
};

Booking Pass::book(TeamState& t, const std::string& model, int gpus) {
  Booking b;
  auto it = t.specificLeft.find(model);
  if (it != t.specificLeft.end()) {
    b.specific = std::min(gpus, it->second);
    it->second -= b.specific;
  }
  b.any = std::min(gpus - b.specific, t.anyLeft);
  t.anyLeft -= b.any;
  t.within += b.specific + b.any;
  return b;
}

void Pass::unbook(TeamState& t, const std::string& model, const Booking& b) {
  if (b.specific > 0) t.specificLeft[model] += b.specific;
  t.anyLeft += b.any;
  t.within -= b.specific + b.any;
}

// Whether borrowed GPUs, with `victims` gone, can be backed by unowned capacity and lenders
// without anyone lending beyond its limit or to itself (see the header).
bool Pass::poolOk(const std::vector<size_t>& victims) const {
  std::vector<int> borrowed(teams_.size());
  for (size_t i = 0; i < teams_.size(); ++i) borrowed[i] = teams_[i].borrowed;
  for (size_t v : victims) borrowed[allocs_[v].team] -= allocs_[v].a->gpus;
  int64_t lendable = 0, total = 0;
  for (size_t i = 0; i < teams_.size(); ++i) {
    lendable += teams_[i].lendable();
    total += borrowed[i];
  }
  if (total > unowned_ + lendable) return false;
  for (size_t i = 0; i < teams_.size(); ++i) {
    if (borrowed[i] > unowned_ + lendable - teams_[i].lendable()) return false;
  }
  return true;
}

bool Pass::victimsSuffice(const std::vector<size_t>& set, const std::string& model,
                          int need) const {
  int onModel = 0;
  for (size_t v : set) {
    if (allocs_[v].a->model == model) onModel += allocs_[v].a->gpus;
  }
  return onModel >= need && poolOk(set);
}

// Fewest victims, then fewest GPUs, then earliest in preference order (lowest priority, most
// recently started). Exact search by increasing set size, pruned on GPUs; a greedy pick when the
// search budget runs out. nullopt when no set of reclaimable allocations is enough.
std::optional<std::vector<size_t>> Pass::chooseVictims(const std::string& model, int need) const {
  std::vector<size_t> cand;
  for (size_t i = 0; i < allocs_.size(); ++i) {
    if (allocs_[i].reclaimable && !allocs_[i].gone) cand.push_back(i);
  }
  std::sort(cand.begin(), cand.end(), [&](size_t x, size_t y) {
    const Allocation& a = *allocs_[x].a;
    const Allocation& b = *allocs_[y].a;
    return std::tuple(a.priority, -a.startedAt, -a.jobId) <
           std::tuple(b.priority, -b.startedAt, -b.jobId);
  });
  if (victimsSuffice({}, model, need)) return std::vector<size_t>{};

  int64_t budget = s_.policy.maxVictimSets;
  std::vector<size_t> best, cur;
  int bestGpus = 0;
  bool exhausted = false;
  // Depth-first over combinations of exactly k candidates, in lexicographic order.
  auto search = [&](auto&& self, size_t from, size_t k, int gpus) -> void {
    if (exhausted) return;
    if (!best.empty() && gpus >= bestGpus) return;  // cannot beat (or tie earlier) best
    if (cur.size() == k) {
      if (--budget < 0) {
        exhausted = true;
        return;
      }
      if (victimsSuffice(cur, model, need)) {
        best = cur;
        bestGpus = gpus;
      }
      return;
    }
    for (size_t i = from; i + (k - cur.size()) <= cand.size(); ++i) {
      cur.push_back(cand[i]);
      self(self, i + 1, k, gpus + allocs_[cand[i]].a->gpus);
      cur.pop_back();
      if (exhausted) return;
    }
  };
  for (size_t k = 1; k <= cand.size() && best.empty() && !exhausted; ++k) search(search, 0, k, 0);
  if (!best.empty()) return best;
  if (!exhausted) return std::nullopt;

  // Greedy: take helpful candidates in preference order until enough, then drop any not needed.
  std::vector<size_t> pick;
  for (size_t c : cand) {
    if (victimsSuffice(pick, model, need)) break;
    pick.push_back(c);
  }
  if (!victimsSuffice(pick, model, need)) return std::nullopt;
  for (size_t i = pick.size(); i-- > 0;) {
    std::vector<size_t> without = pick;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
    if (victimsSuffice(without, model, need)) pick = std::move(without);
  }
  return pick;
}

double Pass::share(const TeamState& t) const {
  double historyGpus =
      t.team->usageGpuSeconds / (static_cast<double>(s_.policy.shareWindowMs) / 1000.0);
  return (t.held + historyGpus) / t.team->weight;
}

std::vector<const std::string*> Pass::modelsFor(const Request& r) const {
  if (!r.model.empty()) return {&r.model};
  // Most free first, so any-model work lands where it disturbs least. Each model's free count is
  // looked up once: a fleet may have hundreds of kinds, and this runs for every request.
  std::vector<std::pair<int, const std::string*>> byFree;
  for (const auto& [m, n] : s_.capacity) {
    if (n > 0) byFree.emplace_back(free_.at(m), &m);
  }
  std::stable_sort(byFree.begin(), byFree.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<const std::string*> models;
  models.reserve(byFree.size());
  for (const auto& [free, m] : byFree) models.push_back(m);
  return models;
}

void Pass::processWithin(const Request& r, const std::vector<const std::string*>& models) {
  TeamState& t = teams_[teamIndex(r.team)];
  struct Plan {
    std::string model;
    std::vector<size_t> victims;
    int need = 0;
    int victimGpus = 0;
  };
  const Plan* chosen = nullptr;
  std::vector<Plan> plans;
  plans.reserve(models.size());
  for (const std::string* model : models) {
    const std::string& m = *model;
    if (t.withinRoom(m) < r.gpus || s_.capacity.at(m) < r.gpus) continue;
    Booking b = book(t, m, r.gpus);
    int need = r.gpus - free_[m];
    int releasing = 0;
    for (const auto& a : allocs_) {
      if (a.a->evicting && !a.claimed && a.a->model == m) releasing += a.a->gpus;
    }
    std::optional<std::vector<size_t>> v = chooseVictims(m, std::max(0, need - releasing));
    unbook(t, m, b);
    if (!v) continue;
    Plan p{m, std::move(*v), need, 0};
    for (size_t i : p.victims) p.victimGpus += allocs_[i].a->gpus;
    plans.push_back(std::move(p));
  }
  // An any-model request may fit on several models: take the one that disturbs least (fewest
  // victims, fewest GPUs, no wait), most free first on ties.
  for (const auto& p : plans) {
    if (chosen == nullptr ||
        std::tuple(p.victims.size(), p.victimGpus, p.need > 0) <
            std::tuple(chosen->victims.size(), chosen->victimGpus, chosen->need > 0)) {
      chosen = &p;
    }
  }
  if (chosen == nullptr) {
    out_.waits.push_back({r.jobId, WaitReason::kGuaranteeInUse, {}});
    return;
  }
  const std::string& m = chosen->model;
  book(t, m, r.gpus);
  for (size_t i : chosen->victims) {
    AllocState& a = allocs_[i];
    a.gone = true;
    teams_[a.team].borrowed -= a.a->gpus;
    out_.victims.push_back({a.a->jobId, a.a->team, a.a->model, a.a->gpus, a.a->preemptible, r.jobId,
                            r.team,
                            "reclaimed by team " + r.team + " for job " + std::to_string(r.jobId)});
  }
  if (chosen->need <= 0) {
    free_[m] -= r.gpus;
    t.held += r.gpus;
    out_.admissions.push_back({r.jobId, m, r.gpus, 0});
    return;
  }
  // It waits; hold what is free now, and the leaving GPUs it counted on, for it.
  QuotaWait w{r.jobId, WaitReason::kWaitingForGrace, {}};
  int stillNeeded = chosen->need;
  for (size_t i : chosen->victims) {
    w.waitingFor.push_back(allocs_[i].a->jobId);
    if (allocs_[i].a->model == m) stillNeeded -= allocs_[i].a->gpus;
  }
  for (auto& a : allocs_) {
    if (stillNeeded <= 0) break;
    if (a.a->evicting && !a.claimed && a.a->model == m) {
      a.claimed = true;
      stillNeeded -= a.a->gpus;
      w.waitingFor.push_back(a.a->jobId);
    }
  }
  free_[m] = std::min(free_[m], 0);
  out_.waits.push_back(std::move(w));
}

void Pass::processBorrow(const Request& r) {
  TeamState& t = teams_[teamIndex(r.team)];
  if (!r.model.empty() && s_.capacity.count(r.model) == 0) {
    out_.waits.push_back({r.jobId, WaitReason::kUnknownModel, {}});
    return;
  }
  std::vector<const std::string*> models = modelsFor(r);
  if (models.empty()) {
    out_.waits.push_back({r.jobId, WaitReason::kUnknownModel, {}});
    return;
  }
  bool anyBigEnough = false;
  bool reasonSet = false;
  WaitReason reason = WaitReason::kNoFreeGpus;
  for (const std::string* model : models) {
    const std::string& m = *model;
    if (s_.capacity.at(m) < r.gpus) continue;
    anyBigEnough = true;
    int within = std::min(r.gpus, t.withinRoom(m));
    int borrow = r.gpus - within;
    WaitReason why;
    if (t.borrowed + borrow > t.team->borrowLimit) {
      why = WaitReason::kOverQuota;
    } else if (free_[m] < r.gpus) {
      why = WaitReason::kNoFreeGpus;
    } else {
      Booking b = book(t, m, within);
      t.borrowed += borrow;
      if (poolOk({})) {
        free_[m] -= r.gpus;
        t.held += r.gpus;
        out_.admissions.push_back({r.jobId, m, within, borrow});
        return;
      }
      t.borrowed -= borrow;
      unbook(t, m, b);
      why = WaitReason::kWaitingForLenders;
    }
    if (!reasonSet) {
      reason = why;
      reasonSet = true;
    }
  }
  out_.waits.push_back({r.jobId, anyBigEnough ? reason : WaitReason::kExceedsCapacity, {}});
}

QuotaDecisions Pass::run() {
  std::vector<const Team*> sorted;
  for (const auto& t : s_.teams) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const Team* a, const Team* b) { return a->name < b->name; });
  int guaranteedTotal = 0, capacityTotal = 0;
  for (const auto& [m, n] : s_.capacity) {
    capacityTotal += n;
    free_[m] = n;
  }
  for (const Team* t : sorted) {
    TeamState ts;
    ts.team = t;
    for (const auto& [m, n] : t->guaranteed) {
      if (m.empty()) {
        ts.anyLeft = n;
      } else {
        ts.specificLeft[m] = n;
      }
      ts.guaranteed += n;
    }
    guaranteedTotal += ts.guaranteed;
    teamIdx_[t->name] = teams_.size();
    teams_.push_back(std::move(ts));
  }
  unowned_ = capacityTotal - guaranteedTotal;

  // Classify running work, oldest first per team: within guarantee until it is used up. allocs_
  // stays in this order, so every later walk over it is independent of the input order.
  std::vector<const Allocation*> running;
  for (const auto& a : s_.running) running.push_back(&a);
  std::sort(running.begin(), running.end(), [](const Allocation* x, const Allocation* y) {
    return std::tuple(x->startedAt, x->jobId) < std::tuple(y->startedAt, y->jobId);
  });
  for (const Allocation* a : running) {
    allocs_.push_back({a, teamIndex(a->team), false, a->evicting, false});
    free_[a->model] -= a->gpus;
    TeamState& t = teams_[teamIndex(a->team)];
    t.held += a->gpus;
    if (a->evicting) continue;
    Booking b = book(t, a->model, a->gpus);
    int within = b.specific + b.any;
    t.borrowed += a->gpus - within;
    allocs_.back().reclaimable = within == 0;
  }

  std::vector<const Request*> pending;
  for (const auto& r : s_.pending) pending.push_back(&r);
  std::sort(pending.begin(), pending.end(), [](const Request* a, const Request* b) {
    return std::tuple(-static_cast<int64_t>(a->priority), a->submittedAt, a->jobId) <
           std::tuple(-static_cast<int64_t>(b->priority), b->submittedAt, b->jobId);
  });

  // Phase 1: requests that fit within their team's remaining guarantee. Whether one fits does
  // not depend on the models' order, so only those that fit pay for modelsFor.
  std::vector<bool> handled(pending.size(), false);
  for (size_t i = 0; i < pending.size(); ++i) {
    const Request* r = pending[i];
    const TeamState& t = teams_[teamIndex(r->team)];
    auto fitsOn = [&](const std::string& m, int capacity) {
      return t.withinRoom(m) >= r->gpus && capacity >= r->gpus;
    };
    bool fits = false;
    if (!r->model.empty()) {
      auto cap = s_.capacity.find(r->model);
      if (cap == s_.capacity.end()) continue;
      fits = fitsOn(r->model, cap->second);
    } else {
      for (const auto& [m, n] : s_.capacity) fits = fits || (n > 0 && fitsOn(m, n));
    }
    if (!fits) continue;
    handled[i] = true;
    processWithin(*r, modelsFor(*r));
  }

  // Phase 2: borrowing, by progressive filling on fair share.
  std::vector<std::vector<const Request*>> queues(teams_.size());
  for (size_t i = 0; i < pending.size(); ++i) {
    if (!handled[i]) queues[teamIndex(pending[i]->team)].push_back(pending[i]);
  }
  std::vector<size_t> head(teams_.size(), 0);
  for (;;) {
    std::optional<size_t> next;
    for (size_t i = 0; i < teams_.size(); ++i) {
      if (head[i] >= queues[i].size()) continue;
      if (!next) {
        next = i;
        continue;
      }
      const Request* a = queues[i][head[i]];
      const Request* b = queues[*next][head[*next]];
      if (std::tuple(share(teams_[i]), a->submittedAt, a->jobId) <
          std::tuple(share(teams_[*next]), b->submittedAt, b->jobId)) {
        next = i;
      }
    }
    if (!next) break;
    processBorrow(*queues[*next][head[*next]++]);
  }

  // Waits in the same priority order as requests, wherever they were decided: each wait's rank
  // is looked up once (ids are unique, so no two waits tie).
  std::vector<std::pair<int64_t, size_t>> rankOf;
  rankOf.reserve(pending.size());
  for (size_t i = 0; i < pending.size(); ++i) rankOf.emplace_back(pending[i]->jobId, i);
  std::sort(rankOf.begin(), rankOf.end());
  std::vector<std::pair<size_t, QuotaWait>> ranked;
  ranked.reserve(out_.waits.size());
  for (QuotaWait& w : out_.waits) {
    auto it = std::lower_bound(rankOf.begin(), rankOf.end(), std::pair(w.jobId, size_t{0}));
    if (it == rankOf.end() || it->first != w.jobId)
      throw std::out_of_range("quota: a wait for job " + std::to_string(w.jobId) +
                              ", which is not in the queue");
    ranked.emplace_back(it->second, std::move(w));
  }
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < ranked.size(); ++i) out_.waits[i] = std::move(ranked[i].second);
  for (const auto& t : teams_) {
    out_.ledger.push_back(
        {t.team->name, t.guaranteed, t.within, t.borrowed, t.lendable(), share(t)});
  }
  out_.unownedGpus = unowned_;
  return std::move(out_);
}

Status validate(const QuotaSnapshot& s) {
  if (s.policy.shareWindowMs <= 0) {
    return Status::InvalidArgument("share window must be > 0 ms", "policy.shareWindowMs");
  }
  if (s.policy.maxVictimSets < 1) {
    return Status::InvalidArgument("victim search budget must be >= 1", "policy.maxVictimSets");
  }
  int64_t capacityTotal = 0, guaranteedTotal = 0;
  for (const auto& [m, n] : s.capacity) {
    if (m.empty()) return Status::InvalidArgument("capacity has an empty model name", "capacity");
    if (n < 0) {
      return Status::InvalidArgument(
          "capacity of model '" + m + "' is negative: " + std::to_string(n), "capacity");
    }
    capacityTotal += n;
  }
  std::set<std::string> names;
  std::map<std::string, int64_t> specific;
  for (const auto& t : s.teams) {
    if (t.name.empty()) return Status::InvalidArgument("a team has no name", "teams");
    if (!names.insert(t.name).second) {
      return Status::InvalidArgument("team '" + t.name + "' appears twice", "teams");
    }
    if (!(t.weight > 0) || !std::isfinite(t.weight)) {
      return Status::InvalidArgument("team '" + t.name + "' has weight <= 0", "weight");
    }
    if (t.borrowLimit < 0 || t.lendLimit < 0 || !(t.usageGpuSeconds >= 0)) {
      return Status::InvalidArgument("team '" + t.name + "' has a negative limit or usage");
    }
    for (const auto& [m, n] : t.guaranteed) {
      if (n < 0) {
        return Status::InvalidArgument("team '" + t.name + "' has a negative guarantee",
                                       "guaranteed");
      }
      if (!m.empty()) specific[m] += n;
      guaranteedTotal += n;
    }
  }
  for (const auto& [m, n] : specific) {
    auto it = s.capacity.find(m);
    int64_t cap = it == s.capacity.end() ? 0 : it->second;
    if (n > cap) {
      return Status::InvalidArgument("guarantees on model '" + m + "' (" + std::to_string(n) +
                                         " GPUs) exceed its capacity (" + std::to_string(cap) + ")",
                                     "guaranteed");
    }
  }
  if (guaranteedTotal > capacityTotal) {
    return Status::InvalidArgument("guarantees (" + std::to_string(guaranteedTotal) +
                                       " GPUs) exceed cluster capacity (" +
                                       std::to_string(capacityTotal) + ")",
                                   "guaranteed");
  }
  // Duplicate ids: a sorted copy says whether there is one; only then does the set below, which
  // says which, cost anything.
  std::vector<int64_t> sortedIds;
  sortedIds.reserve(s.running.size() + s.pending.size());
  for (const auto& a : s.running) sortedIds.push_back(a.jobId);
  for (const auto& r : s.pending) sortedIds.push_back(r.jobId);
  std::sort(sortedIds.begin(), sortedIds.end());
  const bool duplicates = std::adjacent_find(sortedIds.begin(), sortedIds.end()) != sortedIds.end();
  std::set<int64_t> ids;
  for (const auto& a : s.running) {
    if (names.count(a.team) == 0) {
      return Status::InvalidArgument("job " + std::to_string(a.jobId) + ": unknown team '" +
                                     a.team + "'");
    }
    if (a.gpus <= 0 || a.model.empty()) {
      return Status::InvalidArgument("job " + std::to_string(a.jobId) +
                                     ": a running allocation needs GPUs > 0 and a model");
    }
    if (duplicates && !ids.insert(a.jobId).second) {
      return Status::InvalidArgument("job " + std::to_string(a.jobId) + " appears twice");
    }
  }
  for (const auto& r : s.pending) {
    if (names.count(r.team) == 0) {
      return Status::InvalidArgument("job " + std::to_string(r.jobId) + ": unknown team '" +
                                     r.team + "'");
    }
    if (r.gpus <= 0) {
      return Status::InvalidArgument("job " + std::to_string(r.jobId) + ": GPUs must be > 0",
                                     "gpus");
    }
    if (duplicates && !ids.insert(r.jobId).second) {
      return Status::InvalidArgument("job " + std::to_string(r.jobId) + " appears twice");
    }
  }
  return Status::Ok();
}

}  // namespace

const char* waitReasonName(WaitReason reason) {
  switch (reason) {
    case WaitReason::kUnknownModel:
      return "unknown_model";
    case WaitReason::kExceedsCapacity:
      return "exceeds_capacity";
    case WaitReason::kOverQuota:
      return "over_quota";
    case WaitReason::kNoFreeGpus:
      return "no_free_gpus";
    case WaitReason::kWaitingForLenders:
      return "waiting_for_lenders";
    case WaitReason::kWaitingForGrace:
      return "waiting_for_preemption_grace";
    case WaitReason::kGuaranteeInUse:
      return "guarantee_in_use";
  }
  return "unknown";
}

std::string describeWait(const QuotaWait& wait, const Request& r) {
  std::string what = std::to_string(r.gpus) + " " + (r.model.empty() ? "" : r.model + " ") +
                     (r.gpus == 1 ? "GPU" : "GPUs");
  switch (wait.reason) {
    case WaitReason::kUnknownModel:
      return "the cluster has no " + (r.model.empty() ? std::string("GPUs") : r.model + " GPUs");
    case WaitReason::kExceedsCapacity:
      return "the cluster has fewer than " + what + " in total";
    case WaitReason::kOverQuota:
      return "over quota: team " + r.team + " is at its guarantee and its borrow limit";
    case WaitReason::kNoFreeGpus:
      return "quota allows " + what + " for team " + r.team + ", but none are free";
    case WaitReason::kWaitingForLenders:
      return "waiting for lenders: idle capacity others may lend is in use";
    case WaitReason::kWaitingForGrace: {
      std::string ids;
      for (int64_t id : wait.waitingFor) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
      return "within team " + r.team + "'s guarantee; waiting for reclaimed jobs " + ids +
             " to finish their grace period";
    }
    case WaitReason::kGuaranteeInUse:
      return "within team " + r.team + "'s guarantee, but the " + what +
             " are held by other teams' guaranteed work";
  }
  return "waiting";
}

Result<QuotaDecisions> decideQuota(const QuotaSnapshot& snapshot) {
  ALLOT_RETURN_IF_ERROR(validate(snapshot));
  return Pass(snapshot).run();
}

double decayUsage(double previousGpuSeconds, TimeMs elapsedMs, TimeMs halfLifeMs) {
  if (halfLifeMs <= 0) return 0;
  if (elapsedMs <= 0) return previousGpuSeconds;
  return previousGpuSeconds *
         std::exp2(-static_cast<double>(elapsedMs) / static_cast<double>(halfLifeMs));
}

double advanceUsage(double previousGpuSeconds, int gpus, TimeMs elapsedMs, TimeMs halfLifeMs) {
  if (halfLifeMs <= 0) return 0;
  if (elapsedMs <= 0) return previousGpuSeconds;
  double decayed = decayUsage(previousGpuSeconds, elapsedMs, halfLifeMs);
  // Integral over the interval of gpus * 2^(-(t - s) / h) ds, in seconds.
  double h = static_cast<double>(halfLifeMs) / 1000.0;
  double factor = std::exp2(-static_cast<double>(elapsedMs) / static_cast<double>(halfLifeMs));
  return decayed + gpus * h / std::numbers::ln2 * (1.0 - factor);
}

}  // namespace allot::sched::quota
