// Reprovisioning: a drained host (maintenance) runs its profile's hook, an ansible playbook or a
// script, through its agent; the result brings it back to available or leaves it failed, with the
// hook's output in the transition. The hook travels in the host's desired state (see
// model/agent_protocol.h), so a host whose agent reconnects mid-hook hears it again and the
// agent reports the result when it can; the host stays reprovisioning meanwhile. See
// docs/hosts.md.

#include <spdlog/spdlog.h>

#include "control/authz.h"
#include "control/cluster.h"

namespace allot::control {

using model::AdminState;

namespace {

constexpr const char* kSystemActor = "allotd";

std::string failureReason(const model::HookSpec& hook, const model::HookResult& r) {
  std::string why = "reprovisioning with profile " + hook.profile + " failed: ";
  if (r.timedOut) return why + "timed out after " + std::to_string(hook.timeoutMs / 1000) + "s";
  if (r.exitCode < 0) return why + "the hook did not run to its end";
  return why + "exit code " + std::to_string(r.exitCode);
}

}  // namespace

Result<Change<model::Host>> Cluster::reprovisionHost(const Principal& p, const std::string& name,
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
  hook.id = world_.nextHostTransitionId;  // the id the transition below gets
  hook.profile = profile;
  hook.team = h.dedicatedTo;
  hook.kind = prof->second.kind;
  hook.path = prof->second.path;
  hook.timeoutMs = timeoutMs;
  transitionHost(h, AdminState::kReprovisioning, p.name, "profile " + profile, c.batch);
  h.hook = hook;
  c.batch.add(store::PutHost{h});  // again, now with the hook
  c.pushHosts.insert(name);
  c.value = h;
  return c;
}

Change<int> Cluster::agentHookResult(const std::string& name, const model::HookResult& r) {
  Change<int> c;
  c.value = 0;
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end()) return c;
  model::Host& h = it->second;
  if (h.adminState != AdminState::kReprovisioning || !h.hook || h.hook->id != r.id) {
    spdlog::info("hook result ignored: host={} id={} (not waited for)", name, r.id);
    return c;
  }
  const model::HookSpec hook = *h.hook;
  if (r.ok) {
    transitionHost(h, AdminState::kAvailable, kSystemActor,
                   "reprovisioned with profile " + hook.profile, c.batch, r.output);
    if (onQueueChanged_) onQueueChanged_();
  } else {
    transitionHost(h, AdminState::kFailed, kSystemActor, failureReason(hook, r), c.batch, r.output);
  }
  // Its desired state no longer names the hook, so the agent stops reporting it.
  c.pushHosts.insert(name);
  c.value = 1;
  return c;
}

}  // namespace allot::control
