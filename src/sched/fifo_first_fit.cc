#include <algorithm>
#include <map>

#include "sched/scheduler.h"

namespace allot::sched {
namespace {

bool modelMatches(const GpuSlot& g, const std::string& wanted) {
  return wanted.empty() || g.model == wanted;
}

// The reason a job cannot be placed on the fleet even if it were empty, or "" if it could.
std::string impossibleReason(const std::vector<HostView>& hosts, const PendingJob& job) {
  int best = 0;
  int totalMatching = 0;
  for (const auto& h : hosts) {
    int n = 0;
    for (const auto& g : h.gpus) n += modelMatches(g, job.gpuModel) ? 1 : 0;
    best = std::max(best, n);
    totalMatching += n;
  }
  if (best >= job.gpus) return "";
  if (hosts.empty()) return "no host has joined the cluster yet";
  std::string what = job.gpuModel.empty() ? "GPUs" : job.gpuModel + " GPUs";
  if (totalMatching == 0 && !job.gpuModel.empty())
    return "no host has " + job.gpuModel + " GPUs";
  return "no host has " + std::to_string(job.gpus) + " " + what + " (the largest has " +
         std::to_string(best) + ")";
}

}  // namespace

Decisions FifoFirstFitScheduler::decide(const Snapshot& snap) const {
  Decisions out;
  std::vector<HostView> hosts = snap.hosts;
  std::sort(hosts.begin(), hosts.end(),
            [](const HostView& a, const HostView& b) { return a.name < b.name; });

  bool blocked = false;  // FIFO: once the head waits, everyone behind it waits too
  std::string blockedBy;
  int position = 0;
  for (const auto& job : snap.pending) {
    if (!blocked) {
      bool placed = false;
      for (auto& h : hosts) {
        if (!h.schedulable) continue;
        std::vector<int> chosen;
        for (auto& g : h.gpus) {
          if (static_cast<int>(chosen.size()) == job.gpus) break;
          if (g.free && modelMatches(g, job.gpuModel)) chosen.push_back(g.index);
        }
        if (static_cast<int>(chosen.size()) < job.gpus) continue;
        for (auto& g : h.gpus) {
          if (std::find(chosen.begin(), chosen.end(), g.index) != chosen.end()) g.free = false;
        }
        out.placements.push_back({job.id, h.name, chosen});
        placed = true;
        break;
      }
      if (placed) continue;
    }
    ++position;
    Wait w{job.id, "", position};
    std::string impossible = impossibleReason(snap.hosts, job);
    if (!impossible.empty()) {
      w.reason = impossible;
    } else if (blocked) {
      w.reason = "behind job " + blockedBy + " in the queue (FIFO)";
    } else {
      std::string what = job.gpuModel.empty() ? "" : job.gpuModel + " ";
      w.reason = job.gpus == 0 ? "waiting for an online host"
                               : "waiting for " + std::to_string(job.gpus) + " free " + what +
                                     "GPUs on one host";
    }
    out.waits.push_back(std::move(w));
    if (!blocked && impossible.empty()) {
      blocked = true;
      blockedBy = std::to_string(job.id);
    }
  }
  return out;
}

}  // namespace allot::sched
