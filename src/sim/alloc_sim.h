#pragma once
// The FGD paper's allocation-ratio protocol (Weng et al., ATC'23), as its simulator
// (kubernetes-scheduler-simulator) runs it; docs/benchmarks.md ("Protocol") lists each choice.
// Per seed: the nodes are listed in a random order (the simulator prefixes node names with a
// random permutation, so ties between equal scores fall at random); the tasks arrive as a random
// permutation of the pod list followed by copies drawn from it with replacement, until the GPU
// capacity they request would pass 130% of the cluster's (a list already above 130% loses random
// tasks instead). Tasks never depart; one that fits nowhere is skipped. The figure at X% is the
// mean allocated share of GPU capacity over the decisions after which the arrived requests,
// rounded to a whole percent, are X% of capacity. Pure: no I/O, no clock.

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "sched/placement/cluster.h"

namespace allot::sim {

struct SeedResult {
  uint64_t seed = 0;
  double alloc100 = 0;  // percent of GPU capacity allocated when arrivals reached 100%
  double alloc130 = 0;
  int64_t placements = 0;  // tasks placed (all kinds) by the 130% mark
  int64_t decisions = 0;   // tasks offered to the policy
};

struct AllocResult {
  std::string policy;
  double alloc100 = 0;  // means over seeds
  double alloc130 = 0;
  int64_t placements = 0;
  int64_t decisions = 0;
  std::vector<SeedResult> perSeed;
};

// The arrival sequence of one seed, as indices into `tasks`: a permutation of all of them, then
// copies drawn uniformly with replacement while the GPU request of the sequence stays within
// 130% of `capacityMilli`; when the whole list asks for more than that, random tasks are left out
// of the permutation until it fits. Deterministic in (tasks, capacity, seed).
std::vector<int> arrivalSequence(const std::vector<sched::placement::Task>& tasks,
                                 int64_t capacityMilli, uint64_t seed);

// The order nodes are listed in for one seed: a permutation of 0..n-1, deterministic in (n, seed).
std::vector<int> nodeOrder(size_t n, uint64_t seed);

Result<AllocResult> runAlloc(const std::vector<sched::placement::NodeSpec>& nodes,
                             const std::vector<sched::placement::Task>& tasks,
                             const std::string& policy, const std::vector<uint64_t>& seeds);

}  // namespace allot::sim
