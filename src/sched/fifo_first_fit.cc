#include <algorithm>
#include <map>

#include "sched/scheduler.h"

namespace allot::sched {
namespace {

bool modelMatches(const GpuSlot& g, const std::string& wanted) {
  return wanted.empty() || g.model == wanted;
}

// For each wanted model (and "" for any), the most GPUs one host has: computed once per pass so
// that judging a job "too big" costs O(1) however many hosts there are.
class FleetShape {
 public:
  explicit FleetShape(const std::vector<HostView>& hosts) : empty_(hosts.empty()) {
    for (const auto& h : hosts) {
      std::map<std::string, int> perModel;
      for (const auto& g : h.gpus) ++perModel[g.model];
      anyModel_ = std::max(anyModel_, static_cast<int>(h.gpus.size()));
      for (const auto& [model, n] : perModel) largest_[model] = std::max(largest_[model], n);
    }
  }
  bool empty() const { return empty_; }
  int largest(const std::string& model) const {
    if (model.empty()) return anyModel_;
    auto it = largest_.find(model);
    return it == largest_.end() ? -1 : it->second;  // -1: no such model anywhere
  }

 private:
  bool empty_;
  int anyModel_ = 0;
  std::map<std::string, int> largest_;
};

}  // namespace

std::string describeWait(const Wait& w, int gpus, const std::string& gpuModel) {
  std::string what = gpuModel.empty() ? "GPUs" : gpuModel + " GPUs";
  switch (w.kind) {
    case WaitKind::kNoHosts:
      return "no host has joined the cluster yet";
    case WaitKind::kNoSuchModel:
      return "no host has " + gpuModel + " GPUs";
    case WaitKind::kTooBig:
      return "no host has " + std::to_string(gpus) + " " + what + " (the largest has " +
             std::to_string(w.largestHost) + ")";
    case WaitKind::kNeedsOnlineHost:
      return "waiting for an online host";
    case WaitKind::kNeedsFreeGpus:
      return "waiting for " + std::to_string(gpus) + " free " + what + " on one host";
    case WaitKind::kBehindInQueue:
      return "behind job " + std::to_string(w.blockedBy) + " in the queue (FIFO)";
  }
  return "waiting";
}

Decisions FifoFirstFitScheduler::decide(const Snapshot& snap) const {
  Decisions out;
  std::vector<HostView> hosts = snap.hosts;
  std::sort(hosts.begin(), hosts.end(),
            [](const HostView& a, const HostView& b) { return a.name < b.name; });
  FleetShape shape(snap.hosts);
  out.waits.reserve(snap.pending.size());

  int64_t blockedBy = 0;  // FIFO: once the head waits, everyone behind it waits too
  int position = 0;
  for (const auto& job : snap.pending) {
    int largest = shape.largest(job.gpuModel);
    bool impossible = shape.empty() || largest < job.gpus;
    if (blockedBy == 0 && !impossible) {
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
    Wait w;
    w.jobId = job.id;
    w.position = ++position;
    if (shape.empty()) {
      w.kind = WaitKind::kNoHosts;
    } else if (largest < 0) {
      w.kind = WaitKind::kNoSuchModel;
    } else if (impossible) {
      w.kind = WaitKind::kTooBig;
      w.largestHost = largest;
    } else if (blockedBy != 0) {
      w.kind = WaitKind::kBehindInQueue;
      w.blockedBy = blockedBy;
    } else {
      w.kind = job.gpus == 0 ? WaitKind::kNeedsOnlineHost : WaitKind::kNeedsFreeGpus;
      // An impossible job does not block the queue forever; a job that merely waits does.
      blockedBy = job.id;
    }
    out.waits.push_back(w);
  }
  return out;
}

}  // namespace allot::sched
