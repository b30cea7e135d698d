// Placing a request: whole hosts, the node and GPUs for each rank, contour limits (fleet_pass.h).

#include <algorithm>

#include "sched/fleet_pass.h"

namespace allot::sched::fleet_pass {

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
  for (const Slice& sl : p.slices) {
    if (std::find(it.r->imageHosts.begin(), it.r->imageHosts.end(), sl.host) !=
        it.r->imageHosts.end())
      p.imageCached = true;
  }
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
    // Hosts that hold the job's image win the policy's ties (Request::imageHosts).
    std::vector<char> holdsImage;
    if (!r.imageHosts.empty()) {
      holdsImage.assign(st_.size(), 0);
      for (int n = 0; n < st_.size(); ++n)
        holdsImage[n] = std::find(r.imageHosts.begin(), r.imageHosts.end(), f_.hostOf(n).name) !=
                        r.imageHosts.end();
      t.preferNodes = &holdsImage;
    }
    pl::Choice c = preferred >= 0 ? pl::Choice{preferred, st_.firstGpus(preferred, t)}
                                  : policy_->choose(st_, t);
    t.preferNodes = nullptr;
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

}  // namespace allot::sched::fleet_pass
