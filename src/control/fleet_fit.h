#pragma once
// Whether the fleet as it stands could ever run a request: refused at submission, as Slurm
// refuses a job no partition can hold, rather than queued for ever with a wait reason. "Ever"
// counts every joined host whatever its state (offline, drained, leased: it comes back), and the
// hosts and GPUs dedicated to a team that lends its idle capacity; it does not count GPUs an
// admin has yet to share, hosts yet to join or to be handed over. A fleet with no host at all is
// being set up and refuses nothing. docs/scheduler.md, "Requests that can never run".

#include <map>
#include <string>

#include "common/status.h"
#include "model/model.h"

namespace allot::control {

struct FleetFitQuery {
  const std::map<std::string, model::Host>& hosts;
  const std::map<std::string, model::Team>& teams;
  std::string defaultContour;  // what a host with no contour (an old document) belongs to
};

// Ok, or InvalidArgument naming the field that rules every host out ("gpus", "gpu_models",
// "gpu_memory_mib", "min_driver", "min_cuda", "cpu_millis", "memory_mib", "hosts", "contour",
// "image"), with what the fleet offers instead. The caller says how to queue it anyway, where it
// can. `inImage`: it runs in a container image, so only hosts whose agent runs those count.
Status checkFleetCanRun(const FleetFitQuery& fleet, const std::string& team,
                        const std::string& contour, const model::ResourceRequest& r,
                        bool inImage = false);

}  // namespace allot::control
