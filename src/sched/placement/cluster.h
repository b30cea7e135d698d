#pragma once
// The placement model: nodes with CPU, memory and GPUs that can be shared in milli-GPU units, and
// tasks that ask for some of each. ClusterState is the mutable view one placement run works on;
// it is a plain value owned by the caller (one thread), and it never does I/O.
//
// Rules it enforces (apply() checks them and aborts on a broken one):
// - a shared task (one GPU, gpu_milli < 1000) goes on one GPU with that much free capacity, so it
//   never lands on a GPU held whole (a whole-held GPU has 0 free);
// - a whole-GPU task takes only GPUs that are entirely free;
// - CPU and memory must fit; the node's GPU model must be in the task's allowed set.
//
// Per-node state is ~120 bytes (incl. a compact copy for fits()) plus 2 bytes per GPU, far
// under the 1 KiB per GPU budget.

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "sched/placement/model_set.h"

namespace allot::sched::placement {

inline constexpr int kGpuMilli = 1000;      // one whole GPU
inline constexpr int kMaxGpusPerNode = 32;  // GPUs of a node are addressed by a 32-bit mask
inline constexpr int kMaxModels = 65535;    // ids are 16 bits in the per-node state
inline const ModelSet kAnyModel = ModelSet::any();

struct NodeSpec {
  std::string name;
  int64_t cpuMilli = 0;
  int64_t memoryMib = 0;
  int gpus = 0;
  std::string model;  // may be empty for a CPU-only node
};

struct Task {
  int64_t cpuMilli = 0;
  int64_t memoryMib = 0;
  int numGpu = 0;
  int gpuMilli = 0;                    // per GPU; < 1000 only when shared (numGpu == 1)
  ModelSet allowedModels = kAnyModel;  // model ids (ClusterState::modelId)
  // Nodes that win a tie (non-zero by node index; null or short: none): where the job's image is
  // cached already. Only among nodes the policy scores equal, so a preference never overrides
  // what the policy weighs (BestFit's packing, FGD's fragmentation).
  const std::vector<char>* preferNodes = nullptr;
  bool prefers(int node) const {
    return preferNodes && static_cast<size_t>(node) < preferNodes->size() &&
           (*preferNodes)[node] != 0;
  }

  bool shared() const { return numGpu == 1 && gpuMilli > 0 && gpuMilli < kGpuMilli; }
  // GPU capacity asked for, in milli-GPU.
  int64_t gpuRequest() const { return shared() ? gpuMilli : int64_t{numGpu} * kGpuMilli; }
};

// Where one task goes: a node index and the GPUs on it (bit i = GPU i of that node).
struct Choice {
  int node = -1;
  uint32_t gpus = 0;
  bool ok() const { return node >= 0; }
};

class ClusterState {
 public:
  // Fails on a node with more than kMaxGpusPerNode GPUs, negative resources, or more than
  // kMaxModels distinct GPU models.
  static Result<ClusterState> create(const std::vector<NodeSpec>& nodes);

  int size() const { return static_cast<int>(nodes_.size()); }
  const std::string& name(int node) const { return names_[node]; }

  // Model name -> id, -1 when no node has it. Ids follow the names' sorted order, whatever the
  // node order. modelMask turns a list of names into a task's allowed set (empty list = any
  // model; names no node has are simply never satisfied).
  int modelId(const std::string& model) const;
  ModelSet modelMask(const std::vector<std::string>& models) const;

  int numGpus(int node) const { return nodes_[node].numGpu; }
  int gpuFree(int node, int gpu) const { return gpuFree_[nodes_[node].gpuOffset + gpu]; }
  int fullFreeGpus(int node) const { return nodes_[node].fullFree; }
  int64_t gpuFreeTotal(int node) const { return nodes_[node].gpuFreeTotal; }
  int64_t cpuFree(int node) const { return nodes_[node].cpuFree; }
  int64_t memFree(int node) const { return nodes_[node].memFree; }
  int64_t cpuCap(int node) const { return nodes_[node].cpuCap; }
  int64_t memCap(int node) const { return nodes_[node].memCap; }
  int model(int node) const { return nodes_[node].model; }
  int maxFreeMilli(int node) const { return nodes_[node].maxFree; }
  // Changes whenever the node's free resources change, and is unique across every ClusterState
  // of the process, so a policy may cache per-node results keyed by it.
  uint64_t stamp(int node) const { return stamps_[node]; }

  // Whether the task fits on the node at all (CPU, memory, model, and some GPUs to take).
  bool fits(int node, const Task& task) const {
    const Bound& b = bounds_[node];
    if (b.cpuFree < task.cpuMilli || b.memFree < task.memoryMib) return false;
    if (task.numGpu == 0) return true;
    if (!task.allowedModels.contains(b.model)) return false;
    if (task.shared()) return b.maxFree >= task.gpuMilli;
    return b.fullFree >= task.numGpu;
  }
  // Whether GPU `gpu` of the node can take (its share of) the task.
  bool gpuFits(int node, int gpu, const Task& task) const;
  // The lowest-indexed GPUs that can take the task on a node where fits() holds.
  uint32_t firstGpus(int node, const Task& task) const;

  // Takes the resources. The choice must satisfy every rule above: a violation is a bug in the
  // policy and aborts.
  void apply(const Task& task, const Choice& choice);
  // Gives back what apply(task, choice) took, so a tentative hold can be lifted. The choice must
  // be one that was applied: giving back more than was taken is a bug and aborts.
  void release(const Task& task, const Choice& choice);

  int64_t totalGpuMilli() const { return totalGpuMilli_; }
  // The largest node's CPU and GPU count (the paper's BestFit normalizes by them).
  int64_t maxCpuCap() const { return maxCpuCap_; }
  int maxNumGpus() const { return maxNumGpus_; }
  int64_t allocatedGpuMilli() const { return allocatedGpuMilli_; }
  // Free CPU milli over every node.
  int64_t cpuFreeTotal() const { return cpuFreeTotal_; }

 private:
  struct Node {
    int64_t cpuFree = 0, memFree = 0, cpuCap = 0, memCap = 0;
    int64_t gpuFreeTotal = 0;
    uint32_t gpuOffset = 0;
    uint8_t numGpu = 0;
    uint16_t model = 0;
    uint8_t fullFree = 0;
    uint16_t maxFree = 0;  // the most free milli on one GPU
    uint64_t stamp = 0;
  };
  // The fields fits() reads, kept compact and in step with nodes_ so a scan over every node
  // touches 24 bytes per node.
  struct Bound {
    int64_t cpuFree = 0, memFree = 0;
    uint16_t maxFree = 0;
    uint8_t fullFree = 0;
    uint16_t model = 0;
  };
  void syncBound(int node);
  std::vector<Node> nodes_;
  std::vector<Bound> bounds_;
  std::vector<uint64_t> stamps_;
  std::vector<uint16_t> gpuFree_;  // free milli per GPU, nodes_[i].gpuOffset.. for node i
  std::vector<std::string> names_;
  std::vector<std::string> models_;
  int64_t totalGpuMilli_ = 0;
  int64_t allocatedGpuMilli_ = 0;
  int64_t cpuFreeTotal_ = 0;
  int64_t maxCpuCap_ = 0;
  int maxNumGpus_ = 0;
};

}  // namespace allot::sched::placement
