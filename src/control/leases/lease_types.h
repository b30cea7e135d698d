#pragma once
// The lease policy (allotd.toml [leases]) and what a lease request asks. docs/leases.md.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"

namespace allot::control {

// Leases (allotd.toml [leases], docs/leases.md).
struct LeaseOptions {
  // true ("always"): a request within the limits below is approved as it is made; false
  // ("never"): every request waits for a platform admin.
  bool autoApprove = false;
  int maxHosts = 0;           // auto-approval only up to this many hosts; 0 = no limit
  int64_t maxDurationMs = 0;  // auto-approval only up to this long; 0 = no limit
  // Owners of jobs that a lease's start will preempt are told this long before it.
  int64_t noticeMs = 15 * 60'000;
  // A host is held (only work that ends before the lease starts may start there) from this long
  // before its lease starts; earlier, work without a max runtime may start and is preempted at
  // the start, with notice.
  int64_t holdHorizonMs = 24 * 3'600'000;
};

// What a lease request asks (POST /api/v1/leases): named hosts, or a count of hosts matching a
// GPU model and size.
struct LeaseRequest {
  std::string team;
  std::vector<std::string> hosts;
  int count = 0;
  std::string gpuModel;
  int minGpus = 0;
  TimeMs startAt = 0;
  TimeMs endAt = 0;
  std::string reason;
};

}  // namespace allot::control
