// Host lifecycle: the admin state of a host (available, draining, maintenance, failed, retired),
// draining with a deadline, resuming, and the record of every transition. The scheduler sees only
// available hosts (Cluster::snapshot); this file moves hosts between the states. Slurm's
// `scontrol update state=drain` is the model: no new work, running work finishes. See
// docs/hosts.md.

#include <spdlog/spdlog.h>

#include "common/time_format.h"
#include "control/authz.h"
#include "control/hosts/host_service.h"
#include "control/names.h"

namespace allot::control {

using model::AdminState;

namespace {

std::string drainedFor(const std::string& reason) {
  return reason.empty() ? "host drained" : "host drained: " + reason;
}

}  // namespace

void HostService::transitionHost(model::Host& h, AdminState to, const std::string& by,
                                 const std::string& reason, store::WriteBatch& batch,
                                 const std::string& output) {
  model::HostTransition t;
  t.id = world_.nextHostTransitionId++;
  t.host = h.name;
  t.at = clock_.nowMs();
  t.by = by;
  t.from = h.adminState;
  t.to = to;
  t.reason = reason;
  t.output = output;
  h.adminState = to;
  // An available host needs no explanation; the record keeps why it came back.
  h.adminReason = to == AdminState::kAvailable ? "" : reason;
  if (to != AdminState::kDraining) h.drainDeadline = 0;
  // Any transition ends the wait for the host's task (callers starting one start it after): a
  // late result then changes nothing.
  h.task.reset();
  world_.hostTransitions[h.name].push_back(t);
  batch.add(store::PutHost{h}).add(store::AppendHostTransition{t});
  spdlog::info("host admin state: host={} from={} to={} by={} reason={}", h.name,
               model::adminStateName(t.from), model::adminStateName(to), by, reason);
}

Result<std::vector<StoppedJob>> HostService::drainImpact(const Principal& p,
                                                         const std::string& name,
                                                         int64_t deadlineMs,
                                                         TimeMs* stopsAt) const {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "drain hosts"));
  if (deadlineMs < 0) return Status::InvalidArgument("deadline: must not be negative", "deadline");
  *stopsAt = clock_.nowMs() + deadlineMs;
  if (deadlineMs == 0) return std::vector<StoppedJob>{};  // no deadline: work may finish
  return workStoppedOn(world_, {name}, *stopsAt, 0);
}

Result<Change<model::Host>> HostService::drainHost(const Principal& p, const std::string& name,
                                                   int64_t deadlineMs, const std::string& reason) {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "drain hosts"));
  if (deadlineMs < 0) return Status::InvalidArgument("deadline: must not be negative", "deadline");
  model::Host& h = it->second;
  if (h.adminState == AdminState::kFailed || h.adminState == AdminState::kRetired ||
      h.adminState == AdminState::kReprovisioning || h.adminState == AdminState::kRegistering ||
      h.adminState == AdminState::kCommissioning) {
    return Status::FailedPrecondition("host " + name + " is " +
                                      model::adminStateName(h.adminState) + "; resume it first");
  }
  Change<model::Host> c;
  // Already drained: nothing runs there and nothing will be placed, so there is nothing to do.
  if (h.adminState == AdminState::kMaintenance) {
    c.value = h;
    return c;
  }
  // Draining again replaces the deadline and reason (and is recorded, so the log says who
  // changed them).
  h.drainDeadline = deadlineMs > 0 ? clock_.nowMs() + deadlineMs : 0;
  transitionHost(h, AdminState::kDraining, p.name, reason, c.batch);
  // A host with nothing on it is drained at once.
  auto held = world_.hostJobs().find(name);
  if (held == world_.hostJobs().end() || held->second.empty()) {
    transitionHost(h, AdminState::kMaintenance, kSystemActor, reason, c.batch);
    // A host draining for a handover goes on with it.
    continueHandover(h, c.batch, c.pushHosts);
  }
  // Queued jobs' waits should say the host is drained, not that it is busy.
  queueChanged_();
  c.value = h;
  return c;
}

Result<Change<model::Host>> HostService::resumeHost(const Principal& p, const std::string& name) {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "resume hosts"));
  model::Host& h = it->second;
  if (h.adminState == AdminState::kRetired)
    return Status::FailedPrecondition("host " + name + " is retired; it does not come back");
  Change<model::Host> c;
  if (h.adminState != AdminState::kAvailable) {
    // Resuming gives up a handover under way: the host stays with its owner.
    h.handover.reset();
    transitionHost(h, AdminState::kAvailable, p.name, "resumed", c.batch);
    queueChanged_();
  }
  c.value = h;
  return c;
}

Result<Change<model::Host>> HostService::setHostAdminState(const Principal& p,
                                                           const std::string& name, AdminState to,
                                                           const std::string& reason) {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "change host states"));
  if (to != AdminState::kFailed && to != AdminState::kRetired) {
    return Status::InvalidArgument(
        std::string("state: must be failed or retired (drain and resume have their own "
                    "requests), got '") +
            model::adminStateName(to) + "'",
        "state");
  }
  model::Host& h = it->second;
  Change<model::Host> c;
  if (h.adminState == AdminState::kRetired)
    return Status::FailedPrecondition("host " + name + " is retired; it does not come back");
  if (h.adminState != to) {
    // A failed or retired host is handed over to nobody: the handover under way ends here.
    h.handover.reset();
    transitionHost(h, to, p.name, reason, c.batch);
  }
  c.value = h;
  return c;
}

Result<std::vector<model::HostTransition>> HostService::hostTransitions(
    const Principal& p, const std::string& name) const {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  auto t = world_.hostTransitions.find(name);
  if (t == world_.hostTransitions.end()) return std::vector<model::HostTransition>{};
  return t->second;
}

Change<std::vector<int64_t>> HostService::enforceDrains() {
  Change<std::vector<int64_t>> c;
  const TimeMs now = clock_.nowMs();
  for (auto& [name, h] : world_.hosts) {
    if (h.adminState == AdminState::kRetired) {
      // A retired host's agent speaks for nothing once its last job is gone: its credential
      // goes, so the decommissioned machine, or whoever holds its disk, no longer connects as
      // it (its stream closes at its next message). It cannot join again under its name either:
      // that takes `reset-credential`, and it stays retired.
      auto held = world_.hostJobs().find(name);
      if (held == world_.hostJobs().end() || held->second.empty()) {
        const size_t before = c.batch.ops.size();
        access_.revokeHostCredentials(name, c.batch);
        if (c.batch.ops.size() != before)
          spdlog::info("host {}: retired with nothing running; its credential is revoked", name);
      }
      continue;
    }
    if (h.adminState != AdminState::kDraining) continue;
    auto held = world_.hostJobs().find(name);
    if (held == world_.hostJobs().end() || held->second.empty()) {
      transitionHost(h, AdminState::kMaintenance, kSystemActor, h.adminReason, c.batch);
      continueHandover(h, c.batch, c.pushHosts);
      continue;
    }
    if (h.drainDeadline == 0 || now < h.drainDeadline) continue;
    // Past the deadline: the scheduler's own eviction path, so preemptible work is requeued and
    // the rest ends preempted, each with the usual grace. Copied: evict edits hostJobs.
    const std::set<int64_t> ids = held->second;
    for (int64_t id : ids) {
      const model::Job& j = world_.job(id);
      if (j.evicting) continue;  // already leaving
      sched::Eviction e{id, j.preemptible, 0, drainedFor(h.adminReason)};
      jobs_.evict(e, c);
      c.value.push_back(id);
    }
  }
  return c;
}

}  // namespace allot::control
