#include "sched/placement/cluster.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>

namespace allot::sched::placement {
namespace {

[[noreturn]] void brokenInvariant(const char* what, int node) {
  std::fprintf(stderr, "placement invariant broken on node %d: %s\n", node, what);
  std::abort();
}

// Stamps come from one process-wide counter so two states never share a stamp for different
// contents (see ClusterState::stamp).
uint64_t nextStamp() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace

Result<ClusterState> ClusterState::create(const std::vector<NodeSpec>& specs) {
  ClusterState s;
  s.nodes_.reserve(specs.size());
  // Model ids follow the models' names, not the node order, so states over the same nodes listed
  // in different orders agree on them (a task's allowed set can be resolved against either).
  for (const auto& spec : specs) s.models_.push_back(spec.model);
  std::sort(s.models_.begin(), s.models_.end());
  s.models_.erase(std::unique(s.models_.begin(), s.models_.end()), s.models_.end());
  if (s.models_.size() > kMaxModels)
    return Status::InvalidArgument("more than " + std::to_string(kMaxModels) + " GPU models");
  for (const auto& spec : specs) {
    if (spec.gpus < 0 || spec.gpus > kMaxGpusPerNode || spec.cpuMilli < 0 || spec.memoryMib < 0) {
      return Status::InvalidArgument("node " + spec.name + ": resources out of range (gpus " +
                                     std::to_string(spec.gpus) + ", at most " +
                                     std::to_string(kMaxGpusPerNode) + ")");
    }
    const int model = s.modelId(spec.model);
    Node n;
    n.cpuFree = n.cpuCap = spec.cpuMilli;
    n.memFree = n.memCap = spec.memoryMib;
    n.gpuOffset = static_cast<uint32_t>(s.gpuFree_.size());
    n.numGpu = static_cast<uint8_t>(spec.gpus);
    n.model = static_cast<uint16_t>(model);
    n.fullFree = static_cast<uint8_t>(spec.gpus);
    n.maxFree = spec.gpus > 0 ? kGpuMilli : 0;
    n.gpuFreeTotal = int64_t{spec.gpus} * kGpuMilli;
    n.stamp = nextStamp();
    s.gpuFree_.insert(s.gpuFree_.end(), spec.gpus, kGpuMilli);
    s.totalGpuMilli_ += n.gpuFreeTotal;
    s.cpuFreeTotal_ += n.cpuFree;
    s.maxCpuCap_ = std::max(s.maxCpuCap_, spec.cpuMilli);
    s.maxNumGpus_ = std::max(s.maxNumGpus_, spec.gpus);
    s.nodes_.push_back(n);
    s.names_.push_back(spec.name);
    s.bounds_.emplace_back();
    s.stamps_.push_back(0);
    s.syncBound(static_cast<int>(s.nodes_.size()) - 1);
  }
  return s;
}

int ClusterState::modelId(const std::string& model) const {
  auto it = std::lower_bound(models_.begin(), models_.end(), model);
  return it == models_.end() || *it != model ? -1 : static_cast<int>(it - models_.begin());
}

ModelSet ClusterState::modelMask(const std::vector<std::string>& models) const {
  if (models.empty()) return kAnyModel;
  ModelSet set;
  for (const auto& m : models) set.insert(modelId(m));  // -1 (no node has it) adds nothing
  return set;
}

void ClusterState::syncBound(int node) {
  const Node& n = nodes_[node];
  bounds_[node] = Bound{n.cpuFree, n.memFree, n.maxFree, n.fullFree, n.model};
  stamps_[node] = n.stamp;
}

bool ClusterState::gpuFits(int node, int gpu, const Task& t) const {
  int free = gpuFree_[nodes_[node].gpuOffset + gpu];
  return t.shared() ? free >= t.gpuMilli : free == kGpuMilli;
}

uint32_t ClusterState::firstGpus(int node, const Task& t) const {
  uint32_t mask = 0;
  int need = t.shared() ? 1 : t.numGpu;
  for (int g = 0; g < nodes_[node].numGpu && need > 0; ++g) {
    if (gpuFits(node, g, t)) {
      mask |= uint32_t{1} << g;
      --need;
    }
  }
  return mask;
}

void ClusterState::apply(const Task& t, const Choice& c) {
  if (c.node < 0 || c.node >= size()) brokenInvariant("no such node", c.node);
  Node& n = nodes_[c.node];
  if (!fits(c.node, t)) brokenInvariant("task does not fit", c.node);
  int want = t.numGpu == 0 ? 0 : (t.shared() ? 1 : t.numGpu);
  if (std::popcount(c.gpus) != want) brokenInvariant("wrong number of GPUs", c.node);
  if (n.numGpu < 32 && (c.gpus >> n.numGpu) != 0) brokenInvariant("no such GPU", c.node);
  for (int g = 0; g < n.numGpu; ++g) {
    if (!((c.gpus >> g) & 1)) continue;
    if (!gpuFits(c.node, g, t)) brokenInvariant("GPU cannot take the task", c.node);
  }
  n.cpuFree -= t.cpuMilli;
  n.memFree -= t.memoryMib;
  cpuFreeTotal_ -= t.cpuMilli;
  n.stamp = nextStamp();
  if (want == 0) {
    syncBound(c.node);
    return;
  }
  int take = t.shared() ? t.gpuMilli : kGpuMilli;
  uint16_t maxFree = 0;
  int fullFree = 0;
  for (int g = 0; g < n.numGpu; ++g) {
    uint16_t& free = gpuFree_[n.gpuOffset + g];
    if ((c.gpus >> g) & 1) {
      free = static_cast<uint16_t>(free - take);
      n.gpuFreeTotal -= take;
      allocatedGpuMilli_ += take;
    }
    maxFree = std::max(maxFree, free);
    fullFree += free == kGpuMilli;
  }
  n.maxFree = maxFree;
  n.fullFree = static_cast<uint8_t>(fullFree);
  syncBound(c.node);
}

void ClusterState::release(const Task& t, const Choice& c) {
  if (c.node < 0 || c.node >= size()) brokenInvariant("no such node", c.node);
  Node& n = nodes_[c.node];
  n.cpuFree += t.cpuMilli;
  n.memFree += t.memoryMib;
  if (n.cpuFree > n.cpuCap || n.memFree > n.memCap) brokenInvariant("released too much", c.node);
  cpuFreeTotal_ += t.cpuMilli;
  n.stamp = nextStamp();
  int give = t.shared() ? t.gpuMilli : kGpuMilli;
  uint16_t maxFree = 0;
  int fullFree = 0;
  for (int g = 0; g < n.numGpu; ++g) {
    uint16_t& free = gpuFree_[n.gpuOffset + g];
    if (t.numGpu > 0 && ((c.gpus >> g) & 1)) {
      if (free + give > kGpuMilli) brokenInvariant("released a GPU that was free", c.node);
      free = static_cast<uint16_t>(free + give);
      n.gpuFreeTotal += give;
      allocatedGpuMilli_ -= give;
    }
    maxFree = std::max(maxFree, free);
    fullFree += free == kGpuMilli;
  }
  n.maxFree = maxFree;
  n.fullFree = static_cast<uint8_t>(fullFree);
  syncBound(c.node);
}

}  // namespace allot::sched::placement
