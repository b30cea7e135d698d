#pragma once
// PlacementPolicy: picks the node (and the GPUs on it) for one task, given the cluster as it is.
// Policies are pure and deterministic: the same state, task and seed give the same choice. A
// policy object belongs to one placement run on one thread (Random advances its generator).

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "sched/placement/cluster.h"

namespace allot::sched::placement {

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  // A choice with node -1 when the task fits nowhere.
  virtual Choice choose(const ClusterState& state, const Task& task) = 0;
};

// Uniformly at random among the nodes where the task fits; a shared task goes on a fitting GPU
// drawn uniformly (the paper's Random runs with random GPU selection), a whole-GPU task on the
// lowest-indexed free GPUs.
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

// The FGD paper's BestFit baseline, as its simulator scores it: the node with the least left after
// placement, (free CPU / largest node's CPU + free GPU milli / largest node's GPU milli) / 2;
// memory must fit but is not scored. Ties go to the lowest index. A shared task goes on the GPU
// with the least free capacity that still fits it (lowest index on ties).
class BestFitPolicy final : public PlacementPolicy {
 public:
  // PlacementPolicy
  Choice choose(const ClusterState& state, const Task& task) override;
};

// The target workload (Weng et al., ATC'23): the task types seen in a task list, each a
// (CPU, memory, GPU count, milli per GPU, allowed models) class with its popularity.
//
// The fragmentation of a node is the expected free GPU capacity (milli) that a task drawn from
// the workload cannot use. A type that cannot go on the node at all (CPU, memory, model, not
// enough GPUs), and a CPU-only type, leaves all of the node's free GPU capacity fragmented; a type
// that can leaves fragmented the GPUs it cannot use: for a one-GPU type asking d milli, the GPUs
// with less than d free; for a k-GPU type, every GPU that is not entirely free. So
// F(node) = free(node) - U(node), where U is the expected usable capacity, and placing a task
// changes F by -request - (U after - U before). Computing U costs O(types allowed on the model).
class WorkloadDistribution {
 public:
  // Identical tasks form one type; tasks with num_gpu > kMaxGpusPerNode are ignored.
  static WorkloadDistribution fromTasks(const std::vector<Task>& tasks);

  double fragmentation(const ClusterState& state, int node) const;
  // U(node): the expected free GPU milli a task of the workload can use there.
  double usable(const ClusterState& state, int node) const;
  // U(node) after `task` takes its resources there on `gpus` (which must fit).
  double usableAfter(const ClusterState& state, int node, const Task& task, uint32_t gpus) const;
  // The change of F(node) when `task` goes there on `gpus`.
  double delta(const ClusterState& state, int node, const Task& task, uint32_t gpus) const;

  // The task's type, or -1 when no task of the workload is identical to it.
  int typeOf(const Task& task) const;
  int numTypes() const { return static_cast<int>(types_.size()); }
  // Whether some task of the workload that names its allowed models names this one.
  bool askedByName(int model) const {
    return static_cast<size_t>(model) < byModel_.size() &&
           byModel_[model].size() > onAnyModel_.size();
  }
  // CPU milli the workload asks, all its tasks (CPU-only ones too) together, per GPU milli it
  // asks: what free GPUs bring along in demand for CPU.
  double cpuPerGpu() const { return cpuPerGpu_; }

 private:
  struct Type {
    int64_t cpu = 0, mem = 0;
    int numGpu = 0;
    int demand = 0;  // index in demands_ of the milli asked per GPU
    double weight = 0;
  };
  // A task's shape (CPU, memory, GPU count, milli per GPU) and its allowed models.
  struct TaskKey {
    std::array<int64_t, 4> shape{};
    ModelSet models;
    bool operator==(const TaskKey& o) const = default;
  };
  struct KeyHash {
    size_t operator()(const TaskKey& k) const;
  };
  static TaskKey keyOf(const Task& t);
  // GPU types allowed on a model, CPU ascending.
  const std::vector<int>& typesOn(int model) const {
    return static_cast<size_t>(model) < byModel_.size() ? byModel_[model] : onAnyModel_;
  }
  double usableOf(int64_t cpuFree, int64_t memFree, int model, const uint16_t* free, int n) const;
  double usableCompute(int64_t cpuFree, int64_t memFree, int model, const uint16_t* free,
                       int n) const;
  // usableOf depends only on the multiset of per-GPU free values (its sums are of integers, so
  // exact in any order), so it is memoized on (CPU, memory, model, sorted free values): nodes in
  // the same state share one computation. The memo is a cache only (cleared when large); it makes
  // a WorkloadDistribution object single-threaded, like the policy that owns it.
  struct MemoKey {
    int64_t cpu = 0, mem = 0;
    uint16_t model = 0;
    uint8_t n = 0;
    std::array<uint16_t, kMaxGpusPerNode> free{};
    bool operator==(const MemoKey& o) const;
  };
  struct MemoHash {
    size_t operator()(const MemoKey& k) const;
  };
  mutable std::unordered_map<MemoKey, double, MemoHash> memo_;

  std::vector<Type> types_;  // GPU types only (CPU-only types never use GPU capacity)
  // GPU types allowed on each model named by some type, CPU ascending; models past those take
  // only the types allowed on any model (onAnyModel_).
  std::vector<std::vector<int>> byModel_;
  std::vector<int> onAnyModel_;
  std::vector<int> demands_;                           // distinct milli-per-GPU demands, ascending
  std::array<int16_t, kGpuMilli + 1> demandAtMost_{};  // largest demand index <= x, or -1
  std::unordered_map<TaskKey, int, KeyHash> index_;    // task -> type (-2: CPU-only)
  double cpuPerGpu_ = 0;
};

// Fragmentation Gradient Descent (Weng et al., ATC'23). A node's change of fragmentation if the
// task goes there, delta = F(after) - F(before), is computed exactly; for a shared task the GPU on
// the node is the one with the least delta (ties: the GPU with less free capacity). The node is
// chosen by the paper's score, floor(100 * sigmoid(-delta / 1000)), an integer in 0..100, so
// nodes whose deltas differ by less than a score step tie. A CPU-only task's ties go to the
// BestFit order (see BestFitPolicy), then the lowest index. A GPU task's ties go to the lowest
// index (random when the nodes are listed in a random order, as in the paper's simulator: packing
// GPU tasks within a tie costs up to 1.7 points on GPU-sharing and GPU-model-constrained
// workloads), except on a GPU model that no model-constrained task of the workload names, while GPU
// rather than CPU binds: there a whole-GPU task's ties go first to the node whose CPU and GPU left
// are the most even shares of its capacity (Kubernetes' balanced allocation, so that neither is
// left stranded without the other), and a shared task's to the node with the most GPUs already
// shared (so sharing stays on few nodes and the others keep whole GPUs): +0.13 of alloc_100 on
// openb's default trace and +0.07 to +0.14 on its GPU-sharing variants. On the models constrained
// tasks name, either order steers unconstrained tasks onto the scarce GPUs those tasks need (up to
// -0.8 on the gpuspec variants), so ties there stay random. So do they in allotd, whose scheduler
// describes every job by the kinds of host it may use, which name their model: there the workload
// is only the queue and what runs, and in a timed replay of openb the balance, which tends to pick
// empty hosts for a one-GPU job, kept 8-GPU jobs waiting longer (docs/benchmarks.md, "Variants").
// When CPU binds (the free CPU is less than the free GPUs would be asked to bring along at the
// workload's CPU per GPU), a CPU-only task counts a fragmentation change under kSmallDelta as
// none, so packing CPU by the BestFit order decides: there, a few milli-GPU of expected
// fragmentation kept a CPU-only task off nodes with free GPUs at the price of CPU left in pieces
// no task could use, 1.5 points of alloc_100 on openb's cpu250 (docs/benchmarks.md, "Variants").
// Decisions are deterministic. (Comparing the exact deltas instead lets differences of a few
// milli-GPU, far below what the workload estimate can tell apart, decide: 94.8% instead of 95.4%
// on openb's default trace.) Each node's U and each (node, task type) evaluation are cached under
// the node's stamp, so after a placement only the touched node is evaluated again.
class FgdPolicy final : public PlacementPolicy {
 public:
  explicit FgdPolicy(WorkloadDistribution workload) : workload_(std::move(workload)) {}
  // PlacementPolicy
  Choice choose(const ClusterState& state, const Task& task) override;

 private:
  struct Eval {  // 32 bytes: a cache holds one per node and task type
    uint64_t stamp = 0;
    double delta = 0;  // the node's change of fragmentation (milli-GPU)
    double tie = 0;    // tieOrder, cached with the rest
    int score = 0;     // the paper's integer score of the node's fragmentation change
    int16_t gpu = -1;  // for a shared task: the GPU chosen on the node
  };
  struct NodeUsable {
    uint64_t stamp = 0;
    double usable = 0;
  };
  // A fragmentation change a CPU-only task treats as none when CPU binds (milli-GPU).
  static constexpr double kSmallDelta = 50;
  Eval evaluate(const ClusterState& state, int node, const Task& task);
  // The order among nodes of equal score for a GPU task while GPU binds (lower first; equal:
  // the lowest index).
  double tieOrder(const ClusterState& state, int node, const Task& task) const;
  // Whether CPU, not GPU, is what the cluster will run out of first (see above).
  bool cpuBinds(const ClusterState& state) const;
  double usableNow(const ClusterState& state, int node);

  WorkloadDistribution workload_;
  std::vector<NodeUsable> usable_;
  std::vector<std::vector<Eval>> byType_;
  // CPU-only tasks have no workload type; their evaluations are cached per (CPU, memory) asked.
  std::unordered_map<int64_t, std::unordered_map<int64_t, std::vector<Eval>>> cpuOnly_;
  size_t cpuOnlyCount_ = 0;
};

// "random", "firstfit", "bestfit", "fgd". The workload is used by fgd only; seed by random only.
Result<std::unique_ptr<PlacementPolicy>> makePolicy(const std::string& name, uint64_t seed,
                                                    const std::vector<Task>& workload);

}  // namespace allot::sched::placement
