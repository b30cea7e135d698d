// Taking back a team's dedicated capacity that others borrowed (fleet_pass.h).

#include "sched/fleet_pass.h"

namespace allot::sched::fleet_pass {

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

}  // namespace allot::sched::fleet_pass
