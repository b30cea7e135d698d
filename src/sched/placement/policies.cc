#include <algorithm>
#include <limits>

#include "sched/placement/policy.h"

namespace allot::sched::placement {
namespace {

// What is left of a node after the task, as a sum of fractions of its capacity (BestFit score;
// lower is tighter).
double leftAfter(const ClusterState& s, int node, const Task& t) {
  double left = 0;
  if (s.cpuCap(node) > 0) left += double(s.cpuFree(node) - t.cpuMilli) / double(s.cpuCap(node));
  if (s.memCap(node) > 0) left += double(s.memFree(node) - t.memoryMib) / double(s.memCap(node));
  if (s.numGpus(node) > 0) {
    left += double(s.gpuFreeTotal(node) - t.gpuRequest()) / double(s.numGpus(node) * kGpuMilli);
  }
  return left;
}

// For a shared task: the fitting GPU with the least free capacity (lowest index on ties).
uint32_t tightestGpu(const ClusterState& s, int node, const Task& t) {
  int best = -1, bestFree = kGpuMilli + 1;
  for (int g = 0; g < s.numGpus(node); ++g) {
    int free = s.gpuFree(node, g);
    if (free >= t.gpuMilli && free < bestFree) {
      best = g;
      bestFree = free;
    }
  }
  return uint32_t{1} << best;
}

}  // namespace

uint64_t RandomPolicy::next() {
  // splitmix64: the same sequence on every platform and standard library.
  uint64_t z = (rng_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Choice RandomPolicy::choose(const ClusterState& s, const Task& t) {
  fitting_.clear();
  for (int n = 0; n < s.size(); ++n) {
    if (s.fits(n, t)) fitting_.push_back(n);
  }
  if (fitting_.empty()) return {};
  int node = fitting_[next() % fitting_.size()];
  return {node, s.firstGpus(node, t)};
}

Choice FirstFitPolicy::choose(const ClusterState& s, const Task& t) {
  for (int n = 0; n < s.size(); ++n) {
    if (s.fits(n, t)) return {n, s.firstGpus(n, t)};
  }
  return {};
}

Choice BestFitPolicy::choose(const ClusterState& s, const Task& t) {
  int best = -1;
  double bestLeft = std::numeric_limits<double>::infinity();
  for (int n = 0; n < s.size(); ++n) {
    if (!s.fits(n, t)) continue;
    double left = leftAfter(s, n, t);
    if (left < bestLeft) {
      best = n;
      bestLeft = left;
    }
  }
  if (best < 0) return {};
  return {best, t.shared() ? tightestGpu(s, best, t) : s.firstGpus(best, t)};
}

WorkloadDistribution WorkloadDistribution::fromTasks(const std::vector<Task>& tasks) {
  WorkloadDistribution w;
  // Counts by demand: one-GPU shapes by milli, multi-GPU shapes by GPU count, CPU-only.
  std::array<double, kGpuMilli + 1> single{};
  std::array<double, kMaxGpusPerNode + 1> multi{};
  double cpuOnly = 0, total = 0;
  for (const auto& t : tasks) {
    if (t.numGpu < 0 || t.numGpu > kMaxGpusPerNode) continue;
    total += 1;
    if (t.numGpu == 0) {
      cpuOnly += 1;
    } else if (t.numGpu == 1) {
      single[t.shared() ? t.gpuMilli : kGpuMilli] += 1;
    } else {
      multi[t.numGpu] += 1;
    }
  }
  if (total == 0) return w;
  double tail = 0;
  for (int x = kGpuMilli; x >= 0; --x) {
    w.singleTail_[x] = tail / total;  // shapes with demand strictly above x
    tail += single[x];
  }
  double multiTotal = 0;
  for (double m : multi) multiTotal += m;
  double satisfied = 0;  // multi shapes with k <= c
  for (int c = 0; c <= kMaxGpusPerNode + 1; ++c) {
    if (c <= kMaxGpusPerNode && c >= 2) satisfied += multi[c];
    w.multiHold_[c] = double(kGpuMilli) * c * satisfied / total;
  }
  w.totalWeight_ = (multiTotal + cpuOnly) / total;
  for (const auto& t : tasks) {
    if (t.numGpu >= 0 && t.numGpu <= kMaxGpusPerNode) w.cpuSorted_.push_back(t.cpuMilli);
  }
  std::sort(w.cpuSorted_.begin(), w.cpuSorted_.end());
  // Distinct CPU demands with the share of tasks above each: a short table to search.
  const double n = double(w.cpuSorted_.size());
  for (size_t i = 0; i < w.cpuSorted_.size(); ++i) {
    if (i + 1 == w.cpuSorted_.size() || w.cpuSorted_[i + 1] != w.cpuSorted_[i]) {
      w.cpuSteps_.push_back(w.cpuSorted_[i]);
      w.cpuAbove_.push_back(double(w.cpuSorted_.size() - i - 1) / n);
    }
  }
  w.cpuSorted_.clear();
  return w;
}

// F(node) = sum_g x_g * singleTail(x_g) + totalWeight * sum_g x_g - multiHold(fullFree): for a
// multi shape that fits, the entirely free GPUs are usable, so they leave the fragment.
double WorkloadDistribution::cpuShort(int64_t cpuFree) const {
  // The last step <= cpuFree: tasks above it need more than is free.
  auto it = std::upper_bound(cpuSteps_.begin(), cpuSteps_.end(), cpuFree);
  if (it == cpuSteps_.begin()) return cpuSteps_.empty() ? 0 : 1;
  return cpuAbove_[it - cpuSteps_.begin() - 1];
}

double WorkloadDistribution::combine(int64_t cpuFree, int64_t gpuFree, double gpuFrag) const {
  double w = cpuShort(cpuFree);
  return w * double(gpuFree) + (1 - w) * gpuFrag;
}

double WorkloadDistribution::fragmentation(const ClusterState& s, int node) const {
  return combine(s.cpuFree(node), s.gpuFreeTotal(node), gpuFragmentation(s, node));
}

double WorkloadDistribution::gpuFragmentation(const ClusterState& s, int node) const {
  double f = 0;
  for (int g = 0; g < s.numGpus(node); ++g) {
    int x = s.gpuFree(node, g);
    f += x * singleTail_[x] + totalWeight_ * x;
  }
  return f - multiHold_[std::min(s.fullFreeGpus(node), kMaxGpusPerNode + 1)];
}

double WorkloadDistribution::gpuDelta(int free, int take, int fullFree) const {
  int after = free - take;
  double d = after * singleTail_[after] - free * singleTail_[free] - totalWeight_ * take;
  if (free == kGpuMilli && take > 0) {
    int c = std::min(fullFree, kMaxGpusPerNode + 1);
    d -= multiHold_[c - 1] - multiHold_[c];
  }
  return d;
}

double WorkloadDistribution::wholeDelta(int k, int fullFree) const {
  int c = std::min(fullFree, kMaxGpusPerNode + 1);
  int after = std::max(c - k, 0);
  // Each taken GPU goes 1000 -> 0: its single-shape fragment term is 0 before and after.
  return -totalWeight_ * k * kGpuMilli - (multiHold_[after] - multiHold_[c]);
}

Choice FgdPolicy::choose(const ClusterState& s, const Task& t) {
  constexpr double kTie = 1e-9;
  Choice best;
  double bestDelta = std::numeric_limits<double>::infinity();
  double bestLeft = std::numeric_limits<double>::infinity();
  for (int n = 0; n < s.size(); ++n) {
    if (!s.fits(n, t)) continue;
    double delta = 0;
    uint32_t gpus = 0;
    if (t.numGpu == 0) {
      delta = 0;
    } else if (t.shared()) {
      delta = std::numeric_limits<double>::infinity();
      int full = s.fullFreeGpus(n);
      for (int g = 0; g < s.numGpus(n); ++g) {
        int free = s.gpuFree(n, g);
        if (free < t.gpuMilli) continue;
        double d = workload_.gpuDelta(free, t.gpuMilli, full);
        if (d < delta - kTie) {
          delta = d;
          gpus = uint32_t{1} << g;
        }
      }
    } else {
      delta = workload_.wholeDelta(t.numGpu, s.fullFreeGpus(n));
    }
    if (t.cpuMilli > 0 && s.numGpus(n) > 0) {
      // CPU the task takes can strand GPUs: tasks needing more CPU than is left cannot use them.
      double gpuFrag = workload_.gpuFragmentation(s, n);
      int64_t gpuFree = s.gpuFreeTotal(n);
      delta =
          workload_.combine(s.cpuFree(n) - t.cpuMilli, gpuFree - t.gpuRequest(), gpuFrag + delta) -
          workload_.combine(s.cpuFree(n), gpuFree, gpuFrag);
    }
    if (delta > bestDelta + kTie) continue;
    double left = leftAfter(s, n, t);
    if (delta < bestDelta - kTie || left < bestLeft) {
      best = {n, gpus};
      bestDelta = delta;
      bestLeft = left;
    }
  }
  if (best.ok() && !t.shared()) best.gpus = s.firstGpus(best.node, t);
  return best;
}

Result<std::unique_ptr<PlacementPolicy>> makePolicy(const std::string& name, uint64_t seed,
                                                    const std::vector<Task>& workload) {
  if (name == "random") return std::unique_ptr<PlacementPolicy>(new RandomPolicy(seed));
  if (name == "firstfit") return std::unique_ptr<PlacementPolicy>(new FirstFitPolicy());
  if (name == "bestfit") return std::unique_ptr<PlacementPolicy>(new BestFitPolicy());
  if (name == "fgd") {
    return std::unique_ptr<PlacementPolicy>(
        new FgdPolicy(WorkloadDistribution::fromTasks(workload)));
  }
  return Status::InvalidArgument("unknown placement policy '" + name +
                                 "' (random, firstfit, bestfit, fgd)");
}

}  // namespace allot::sched::placement
