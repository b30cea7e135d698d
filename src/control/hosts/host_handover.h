#pragma once
// HostHandover: what the lease and upgrade controllers need of the hosts service, and no more.
// A handover drains the host of others' work, runs the new owner's profile on it (a wipe, the
// team's hook, a health check) and then gives it to the new owner (docs/hosts.md).

#include <cstdint>
#include <string>

#include "common/status.h"
#include "control/change.h"
#include "model/model.h"

namespace allot::control {

class HostHandover {
 public:
  virtual ~HostHandover() = default;
  // Starts handing `host` over to `to`; others' work is preempted `deadlineMs` from now (0: at
  // once). Refused (FailedPrecondition) while the host is failed, retired or in another handover.
  virtual Result<Change<model::Host>> handOverHost(const std::string& host,
                                                   const model::Handover& to,
                                                   int64_t deadlineMs) = 0;
};

}  // namespace allot::control
