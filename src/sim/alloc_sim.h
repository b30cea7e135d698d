#pragma once
// The FGD paper's allocation-ratio protocol (Weng et al., ATC'23): tasks arrive in a random order
// drawn per seed, never depart, and are placed one by one (a task that fits nowhere is skipped)
// until the GPU capacity requested by arrived tasks reaches 130% of the cluster's. The figure is
// the allocated share of GPU capacity when arrivals reach 100% and 130%. Pure: no I/O, no clock.

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

// When the task list runs out before the 130% mark, it is shuffled again and replayed (the
// paper's simulator likewise inflates the workload by resampling).
Result<AllocResult> runAlloc(const std::vector<sched::placement::NodeSpec>& nodes,
                             const std::vector<sched::placement::Task>& tasks,
                             const std::string& policy, const std::vector<uint64_t>& seeds);

}  // namespace allot::sim
