// The fleet scheduler's pass: validation, what runs, which kinds a request may use, and the
// pass itself (fleet_pass.h).

#include "sched/fleet_pass.h"

#include "sched/lease_hold.h"

namespace allot::sched::fleet_pass {

Status Pass::validate() const {
  // Duplicate ids are looked for in a sorted copy first; only a snapshot that has one pays for
  // the set that tells which comes first, in the order the errors are reported.
  std::vector<int64_t> sorted;
  sorted.reserve(s_.running.size() + s_.pending.size());
  for (const auto& j : s_.running) sorted.push_back(j.id);
  for (const auto& r : s_.pending) sorted.push_back(r.id);
  std::sort(sorted.begin(), sorted.end());
  const bool duplicates = std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
  std::set<int64_t> ids;
  auto checkTeam = [&](const std::string& team, int64_t id) -> Status {
    if (!teams_.count(team))
      return Status::InvalidArgument("job " + std::to_string(id) + ": unknown team '" + team + "'",
                                     "team");
    if (duplicates && !ids.insert(id).second)
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
    if (r.images && !kind.images) continue;
    // A host held for a lease takes only work that ends before the lease starts.
    if (!ignoreHolds && kind.heldFrom > 0 &&
        !endsBeforeLease(s_.now, r.maxRuntimeMs, kind.heldFrom))
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

namespace {

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

}  // namespace

Result<Decisions> Pass::run() {
  for (const auto& t : s_.teams) {
    if (!teams_.emplace(t.name, &t).second)
      return Status::InvalidArgument("team '" + t.name + "' appears twice", "teams");
    if (t.lendDedicated) lenders_.insert(t.name);
  }
  ALLOT_RETURN_IF_ERROR(validate());
  for (const auto& j : s_.running) running_[j.id] = &j;
  kindMinGpuMemory_.assign(f_.kinds().size(), std::numeric_limits<int64_t>::max());
  for (size_t k = 0; k < f_.kinds().size(); ++k) {
    const fleet::Kind& kind = f_.kinds()[k];
    kindsOfModel_[kind.model].insert(f_.kindModel(static_cast<int>(k)));
    anyHeld_ = anyHeld_ || kind.heldFrom > 0;
    contours_.insert(kind.contour);
  }
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
  for (size_t i = 0; i < items.size(); ++i) items[i].rank = static_cast<int>(i);
  // Lookups by job id, into what is sorted by it (a deep queue's maps cost more than the pass's
  // own work); `ids` holds (id, index) pairs.
  auto byJobId = [](const auto& ids, int64_t id) {
    auto it = std::lower_bound(ids.begin(), ids.end(), id,
                               [](const auto& e, int64_t key) { return e.first < key; });
    return it != ids.end() && it->first == id ? it->second : -1;
  };
  std::vector<std::pair<int64_t, int>> itemById;
  itemById.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i)
    itemById.emplace_back(items[i].r->id, static_cast<int>(i));
  std::sort(itemById.begin(), itemById.end());

  std::set<std::string> poolModels;
  for (const auto& k : f_.kinds()) {
    if (k.owner.empty() && !k.model.empty()) poolModels.insert(k.model);
  }
  std::vector<pl::Task> workload;
  workload.reserve(items.size());
  for (Item& it : items) {
    it.wait = impossible(*it.r);
    it.neverFits = it.wait.has_value();
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
    const int forJob = byJobId(itemById, v.forJob);
    if (victim != running_.end() && forJob >= 0 &&
        victim->second->contour != items[forJob].r->contour)
      continue;
    out_.evictions.push_back({v.jobId, v.preemptible, v.forJob, v.reason});
    evicted_.insert(v.jobId);
  }
  // Placement in queue order: an admitted request is placed (or, fragmented, reserves room); one
  // that quota allows but that finds its GPUs in use reserves room too, so that later, smaller
  // work cannot starve it, except by backfilling before it starts.
  std::vector<std::pair<int64_t, int>> admitted, refused;  // job id -> index in qd's lists
  admitted.reserve(qd->admissions.size());
  for (size_t i = 0; i < qd->admissions.size(); ++i)
    admitted.emplace_back(qd->admissions[i].jobId, static_cast<int>(i));
  std::sort(admitted.begin(), admitted.end());
  refused.reserve(qd->waits.size());
  for (size_t i = 0; i < qd->waits.size(); ++i)
    refused.emplace_back(qd->waits[i].jobId, static_cast<int>(i));
  std::sort(refused.begin(), refused.end());
  // Requests admitted (even partly) within their team's guarantee go first, then the rest, each
  // group in queue order: quota ranked the guaranteed ones ahead and may have reclaimed borrowed
  // work for them, so an earlier request that quota refused must not reserve the room they were
  // admitted to (it would sit idle: the refused one may not use it either).
  std::vector<Item*> placeOrder;
  placeOrder.reserve(forQuota.size());
  auto withinGuarantee = [&](const Item* it) {
    const int a = byJobId(admitted, it->r->id);
    return a >= 0 && qd->admissions[a].withinGpus > 0;
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
    if (const int a = byJobId(admitted, r.id); a >= 0) {
      const q::Admission* adm = &qd->admissions[a];
      const pl::ModelSet pool = mask(r, Phase::kPool, adm->model);
      if (tryPlace(it, pool, PlacedBy::kQuota, adm)) continue;
      pl::Task t = taskFor(r, pool);
      if (tryBackfill(it, t)) continue;
      it.wait = r.wholeHost ? Wait{r.id, WaitKind::kNoIdleHost} : unplacedWait(r, t);
      if (it.wait->kind == WaitKind::kFragmented || it.wait->kind == WaitKind::kNoFreeGpus)
        reserve(it, t);
      continue;
    }
    const q::QuotaWait& w = qd->waits.at(byJobId(refused, r.id));
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
    if (it.neverFits) continue;
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

}  // namespace allot::sched::fleet_pass

namespace allot::sched {

Result<Decisions> decide(const Snapshot& snapshot) {
  auto fleet = fleet::Fleet::build(snapshot);
  if (!fleet.ok()) return fleet.status();
  return fleet_pass::Pass(snapshot, *fleet).run();
}

}  // namespace allot::sched
