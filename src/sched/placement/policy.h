#pragma once
// PlacementPolicy: picks the node (and the GPUs on it) for one task, given the cluster as it is.
// Policies are pure and deterministic: the same state, task and seed give the same choice. A
// policy object belongs to one placement run on one thread (Random advances its generator).

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "sched/placement/cluster.h"

namespace allot::sched::placement {

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  // A choice with node -1 when the task fits nowhere.
  virtual Choice choose(const ClusterState& state, const Task& task) = 0;
};

// Uniformly at random among the nodes where the task fits; the lowest-indexed fitting GPUs.
class RandomPolicy final : public PlacementPolicy {
 public:
  explicit RandomPolicy(uint64_t seed) : rng_(seed) {}
  // PlacementPolicy
  Choice choose(const ClusterState& state, const Task& task) override;

 private:
  uint64_t next();
  uint64_t rng_;
  std::vector<int> fitting_;
};

// The first node in index order where the task fits; the lowest-indexed fitting GPUs.
class FirstFitPolicy final : public PlacementPolicy {
 public:
  // PlacementPolicy
  Choice choose(const ClusterState& state, const Task& task) override;
};

// The FGD paper's BestFit baseline: the node with the least resources left after placement
// (free CPU, memory and GPU, each as a fraction of the node's capacity, summed); a shared task
// goes on the GPU with the least free capacity that still fits it.
class BestFitPolicy final : public PlacementPolicy {
 public:
  // PlacementPolicy
  Choice choose(const ClusterState& state, const Task& task) override;
};

// The target workload: how often each (num_gpu, gpu_milli) shape occurs, precomputed into tables
// so that the fragmentation of a node, and its change under one placement, costs O(GPUs).
//
// Fragmentation of a node for one task shape m (Weng et al., ATC'23) is the free GPU capacity m
// cannot use: for a one-GPU shape asking d milli, the free capacity of GPUs with less than d
// free; for a k-GPU shape, the free capacity of partly used GPUs when k GPUs are entirely free,
// and all free capacity otherwise; for a CPU-only shape, all free capacity. The node's
// fragmentation is the expectation over the workload.
class WorkloadDistribution {
 public:
  // Shapes are counted as given; tasks with num_gpu > kMaxGpusPerNode are ignored.
  static WorkloadDistribution fromTasks(const std::vector<Task>& tasks);

  // Tasks of the workload that need more CPU than a node has left cannot use any of its GPUs;
  // CPU and GPU shapes are taken as independent, so that stays O(log tasks).
  double fragmentation(const ClusterState& state, int node) const;
  // The GPU-shape part alone, before CPU is considered.
  double gpuFragmentation(const ClusterState& state, int node) const;
  // Fragmentation from a node's free CPU, free GPU milli and GPU-shape part.
  double combine(int64_t cpuFree, int64_t gpuFree, double gpuFrag) const;
  // The change of the GPU-shape part when a GPU with `free` milli gives `take` milli.
  double gpuDelta(int free, int take, int fullFree) const;
  // The change when `k` entirely free GPUs are taken whole from a node with `fullFree` of them.
  double wholeDelta(int k, int fullFree) const;

 private:
  std::array<double, kGpuMilli + 1> singleTail_{};       // P(one-GPU shape with demand > x)
  std::array<double, kMaxGpusPerNode + 2> multiHold_{};  // 1000 * c * P(multi shape with k <= c)
  double cpuShort(int64_t cpuFree) const;  // share of tasks needing more CPU than cpuFree
  double totalWeight_ = 0;
  std::vector<int64_t> cpuSorted_;  // only while building
  std::vector<int64_t> cpuSteps_;   // distinct CPU demands, ascending
  std::vector<double> cpuAbove_;  // share of tasks demanding more than cpuSteps_[i]  // P(multi) +
                                  // P(CPU-only): weight of a node's whole free capacity
};

// Fragmentation Gradient Descent: the node (and GPU) whose fragmentation grows least; ties go to
// the BestFit order, then the lowest index, so decisions are deterministic.
class FgdPolicy final : public PlacementPolicy {
 public:
  explicit FgdPolicy(WorkloadDistribution workload) : workload_(std::move(workload)) {}
  // PlacementPolicy
  Choice choose(const ClusterState& state, const Task& task) override;

 private:
  WorkloadDistribution workload_;
};

// "random", "firstfit", "bestfit", "fgd". The workload is used by fgd only; seed by random only.
Result<std::unique_ptr<PlacementPolicy>> makePolicy(const std::string& name, uint64_t seed,
                                                    const std::vector<Task>& workload);

}  // namespace allot::sched::placement
