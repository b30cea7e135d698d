#pragma once
// The rule of a host held for a lease (docs/leases.md): only work whose declared maximum runtime
// ends by the lease's start may start there; work without one could still hold it then. One
// definition for the pass that decides (fleet_pass.cc) and for allotd applying its decisions
// later (Cluster::finishPass), which asks it again with the time of applying.

#include <cstdint>

#include "common/clock.h"

namespace allot::sched {

inline bool endsBeforeLease(TimeMs now, int64_t maxRuntimeMs, TimeMs leaseStart) {
  return maxRuntimeMs > 0 && now + maxRuntimeMs <= leaseStart;
}

}  // namespace allot::sched
