// Reservations for requests that quota admits but no host has room for, and backfill of
// shorter work around them (fleet_pass.h).

#include "sched/fleet_pass.h"

namespace allot::sched::fleet_pass {

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

}  // namespace allot::sched::fleet_pass
