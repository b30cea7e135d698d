// Reprovisioning: a drained host (maintenance) runs its profile's hook, an ansible playbook or a
// script, through its agent; the result brings it back to available or leaves it failed, with the
// hook's output in the transition. The hook travels in the host's desired state (see
// model/agent_protocol.h), so a host whose agent reconnects mid-hook hears it again and the
// agent reports the result when it can; the host stays reprovisioning meanwhile. See
// docs/hosts.md.

#include <spdlog/spdlog.h>

#include "control/authz.h"
#include "control/hosts/host_service.h"
#include "control/names.h"

namespace allot::control {

using model::AdminState;

Result<Change<model::Host>> HostService::reprovisionHost(const Principal& p,
                                                         const std::string& name,
                                                         const std::string& profile,
                                                         int64_t timeoutMs) {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "reprovision hosts"));
  auto prof = options_.hookProfiles.find(profile);
  if (prof == options_.hookProfiles.end()) {
    std::string known;
    for (const auto& [n, _] : options_.hookProfiles) known += (known.empty() ? "" : ", ") + n;
    return Status::InvalidArgument("profile: no profile '" + profile + "' in allotd's [hooks] (" +
                                       (known.empty() ? "none configured" : "known: " + known) +
                                       ")",
                                   "profile");
  }
  if (timeoutMs <= 0) return Status::InvalidArgument("timeout: must be positive", "timeout");
  model::Host& h = it->second;
  // Only a drained host: a hook reinstalls what running work stands on.
  if (h.adminState != AdminState::kMaintenance) {
    return Status::FailedPrecondition("host " + name + " is " +
                                      model::adminStateName(h.adminState) +
                                      "; only a host in maintenance can be reprovisioned (drain "
                                      "it first)");
  }
  Change<model::Host> c;
  model::HookSpec hook;
  hook.profile = profile;
  hook.team = h.dedicatedTo;
  hook.kind = prof->second.kind;
  hook.path = prof->second.path;
  hook.timeoutMs = timeoutMs;
  transitionHost(h, AdminState::kReprovisioning, p.name, "profile " + profile, c.batch);
  model::HostTask task;
  task.purpose = "reprovisioning with profile " + profile;
  task.hook = hook;
  task.health = healthStep(h, true);
  startTask(h, std::move(task), c.batch);
  c.pushHosts.insert(name);
  c.value = h;
  return c;
}

}  // namespace allot::control
