// Handover: a host changes hands (to a team, back to the shared pool) with nothing of its
// previous tenant left. Drain, then one host task: wipe, the new owner's profile, health check;
// its result makes the host its new owner's (host_tasks.cc). The handover is kept on the
// host, in the store, so an allotd restart anywhere along the way resumes it. See docs/hosts.md.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "control/authz.h"
#include "control/hosts/host_service.h"
#include "control/names.h"

namespace allot::control {

using model::AdminState;

namespace {

std::string handoverPurpose(const std::string& team) {
  return team.empty() ? "handover to the shared pool" : "handover to team " + team;
}

}  // namespace

std::optional<model::HookSpec> HostService::handoverHook(const std::string& team,
                                                         const std::string& named) const {
  const HostLifecycleOptions& o = options_.lifecycle;
  std::string profile = o.defaultProfile;
  if (auto t = o.teamProfiles.find(team); t != o.teamProfiles.end()) profile = t->second;
  if (!named.empty()) profile = named;
  auto prof = options_.hookProfiles.find(profile);
  if (profile.empty() || prof == options_.hookProfiles.end()) return std::nullopt;
  model::HookSpec hook;
  hook.profile = profile;
  hook.team = team;
  hook.kind = prof->second.kind;
  hook.path = prof->second.path;
  hook.timeoutMs = o.taskTimeoutMs;
  return hook;
}

void HostService::continueHandover(model::Host& h, store::WriteBatch& batch,
                                   std::set<std::string>& push) {
  if (!h.handover || h.adminState != AdminState::kMaintenance) return;
  const model::Handover to = *h.handover;
  const std::string purpose =
      to.upgradeId ? "upgrade " + std::to_string(to.upgradeId) + " with profile " + to.profile
                   : handoverPurpose(to.team);
  transitionHost(h, AdminState::kReprovisioning, to.by, purpose, batch);
  model::HostTask task;
  task.purpose = purpose;
  if (to.wipe) task.wipe = model::WipeStep{options_.lifecycle.wipeHome};
  task.hook = handoverHook(to.team, to.profile);
  task.health = healthStep(h, true);
  startTask(h, std::move(task), batch);
  push.insert(h.name);
}

Result<Change<model::Host>> HostService::handOverHost(const std::string& name,
                                                      const model::Handover& to,
                                                      int64_t deadlineMs) {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end()) return Status::NotFound("no host '" + name + "'");
  if (!to.team.empty() && !world_.teams.count(to.team))
    return Status::NotFound("no team '" + to.team + "'", "team");
  if (deadlineMs < 0) return Status::InvalidArgument("deadline: must not be negative", "deadline");
  model::Host& h = it->second;
  // One handover at a time: replacing one under way would break what asked for it (an upgrade's
  // step, a lease's start or return). The caller retries, or an admin resumes the host first.
  if (h.handover && (h.handover->team != to.team || h.handover->leaseId != to.leaseId ||
                     h.handover->upgradeId != to.upgradeId)) {
    const model::Handover& busy = *h.handover;
    std::string what = busy.upgradeId ? "upgrade " + std::to_string(busy.upgradeId)
                       : busy.leaseId ? "lease " + std::to_string(busy.leaseId)
                                      : "a handover by " + busy.by;
    return Status::FailedPrecondition("host " + name + " is being handed over for " + what +
                                      "; wait for it to end, or resume the host to give it up");
  }
  switch (h.adminState) {
    case AdminState::kAvailable:
    case AdminState::kDraining:
    case AdminState::kMaintenance:
      break;
    case AdminState::kReprovisioning:
      // Another handover under way to the same owner: nothing to do; anything else must end first.
      if (h.handover && h.handover->team == to.team) {
        Change<model::Host> same;
        same.value = h;
        return same;
      }
      [[fallthrough]];
    default:
      return Status::FailedPrecondition("host " + name + " is " +
                                        model::adminStateName(h.adminState) +
                                        "; a handover needs a host in service, draining or in "
                                        "maintenance");
  }
  Change<model::Host> c;
  h.handover = to;
  const std::string why = to.reason.empty() ? handoverPurpose(to.team) : to.reason;
  if (h.adminState == AdminState::kAvailable || h.adminState == AdminState::kDraining) {
    // The drain: others' work may finish until the deadline; 0 preempts it at once.
    h.drainDeadline = clock_.nowMs() + deadlineMs;
    transitionHost(h, AdminState::kDraining, to.by, why, c.batch);
  }
  auto held = world_.hostJobs().find(name);
  if (h.adminState == AdminState::kDraining &&
      (held == world_.hostJobs().end() || held->second.empty()))
    transitionHost(h, AdminState::kMaintenance, kSystemActor, why, c.batch);
  continueHandover(h, c.batch, c.pushHosts);
  c.batch.add(store::PutHost{h});
  queueChanged_();
  spdlog::info("handover: host={} to={} by={} deadline_ms={}", name,
               to.team.empty() ? "(shared pool)" : to.team, to.by, deadlineMs);
  c.value = h;
  return c;
}

Result<Change<model::Host>> HostService::assignHost(const Principal& p, const std::string& name,
                                                    const std::string& team,
                                                    const std::vector<int>& gpus,
                                                    int64_t deadlineMs, const std::string& reason) {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "assign hosts"));
  if (!gpus.empty()) {
    // Single GPUs of a host others keep using: dedicated (or, team "", returned to the host's
    // pool) at once, no drain and no wipe (the host's other tenants stay); the scheduler places
    // nothing of other teams there from now, and running work finishes where it is.
    model::Host& h = it->second;
    for (int index : gpus) {
      if (std::none_of(h.gpus.begin(), h.gpus.end(),
                       [&](const model::Gpu& g) { return g.index == index; }))
        return Status::NotFound("host " + name + " has no GPU " + std::to_string(index), "gpus");
    }
    if (!team.empty() && !world_.teams.count(team))
      return Status::NotFound("no team '" + team + "'", "team");
    Change<model::Host> c;
    for (int index : gpus) {
      GpuSettings s;
      s.dedicatedTo = team;
      auto one = setGpu(p, name, index, s);
      if (!one.ok()) return one.status();
      c.batch.add(store::PutHost{one->value});
      c.value = one->value;
    }
    return c;
  }
  return handOverHost(name, model::handoverTo(team, p.name, reason), deadlineMs);
}

}  // namespace allot::control
