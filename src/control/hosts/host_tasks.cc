// Host tasks: what a host's agent runs between tenants (wipe, hook, health check), and their
// results. Commissioning, reprovisioning, handovers and periodic health checks all come here;
// the task rides in the host's desired state until the agent reports its result, so a host whose
// agent reconnects mid-task hears it again (model/agent_protocol.h). See docs/hosts.md.

#include <spdlog/spdlog.h>

#include "common/log.h"
#include "common/utf8.h"
#include "control/authz.h"
#include "control/hosts/host_service.h"
#include "control/names.h"

namespace allot::control {

using model::AdminState;

namespace {

constexpr size_t kMaxFollowedOutput = 256 * 1024;

// What a host reports of a task, bounded as an honest agent bounds it (the output's last 256 KiB,
// as the agent's runner keeps it) and its lines to a line's worth: a host's credential must not
// store megabytes in each transition, nor write them into one line of allotd's log.
model::HostTaskResult boundedTaskResult(model::HostTaskResult r) {
  constexpr size_t kMaxOutput = 256 * 1024;
  constexpr size_t kMaxLine = 4096;
  // Problems are joined into the failure's reason: 16 of 1 KiB at most (a host has at most 64
  // GPUs, and its checks report a handful).
  constexpr size_t kMaxItems = 16;
  constexpr size_t kMaxItem = 1024;
  if (r.output.size() > kMaxOutput) {
    size_t from = r.output.size() - kMaxOutput;
    // Not in the middle of a character: past its continuation bytes.
    while (from < r.output.size() && (static_cast<unsigned char>(r.output[from]) & 0xC0) == 0x80)
      ++from;
    r.output.erase(0, from);
  }
  r.failedStep = cutUtf8(r.failedStep, 64);
  r.reason = cutUtf8(r.reason, kMaxLine);
  if (r.health) {
    if (r.health->problems.size() > kMaxItems) r.health->problems.resize(kMaxItems);
    for (auto& problem : r.health->problems) problem = cutUtf8(problem, kMaxItem);
    // One model a GPU: as many as an inventory may claim.
    if (r.health->gpuModels.size() > 64) r.health->gpuModels.resize(64);
    for (auto& model : r.health->gpuModels) model = cutUtf8(model, 256);
    for (auto* text : {&r.health->driverVersion, &r.health->cudaVersion, &r.health->burnIn})
      *text = cutUtf8(*text, kMaxLine);
  }
  return r;
}

std::string joinProblems(const model::HostTaskResult& r) {
  if (!r.health || r.health->problems.empty()) return r.reason;
  std::string out;
  for (const auto& p : r.health->problems) out += (out.empty() ? "" : "; ") + p;
  return out;
}

// One line for the record: why the task failed.
std::string failureReason(const model::HostTask& task, const model::HostTaskResult& r) {
  std::string why = task.purpose + " failed: ";
  if (r.failedStep == "health") return why + "health check: " + joinProblems(r);
  if (r.failedStep == "wipe") return why + "wipe: " + r.reason;
  if (r.failedStep == "hook" && task.hook) {
    // "reprovisioning with profile X failed: exit code 2"; other purposes name the profile.
    if (task.purpose.find("profile " + task.hook->profile) == std::string::npos)
      why += "profile " + task.hook->profile + ": ";
    if (r.hook && r.hook->timedOut)
      return why + "timed out after " + std::to_string(task.hook->timeoutMs / 1000) + "s";
    if (r.hook && r.hook->exitCode >= 0)
      return why + "exit code " + std::to_string(r.hook->exitCode);
    return why + (r.reason.empty() ? "the hook did not run to its end" : r.reason);
  }
  return why + (r.reason.empty() ? "the task did not run to its end" : r.reason);
}

}  // namespace

model::HealthStep HostService::healthStep(const model::Host& h, bool burnIn) const {
  const HostLifecycleOptions& o = options_.lifecycle;
  model::HealthStep s;
  s.gpuCount = h.expectedGpuCount;
  s.gpuModels = h.expectedGpuModels;
  s.minDriver = o.minDriver;
  s.minFreeDiskMib = o.minFreeDiskMib;
  s.burnIn = burnIn && o.burnIn;
  s.burnInMs = o.burnInMs;
  return s;
}

void HostService::startTask(model::Host& h, model::HostTask task, store::WriteBatch& batch) {
  task.id = ++h.lastTaskId;
  if (task.hook) {
    task.hook->id = task.id;
    task.hook->accounts = access_.accountsFor(task.hook->team);
  }
  h.task = std::move(task);
  taskOutputs_.erase(h.name);
  batch.add(store::PutHost{h});
  spdlog::info("host task: host={} id={} purpose={} wipe={} hook={} health={}", h.name, h.task->id,
               h.task->purpose, h.task->wipe.has_value(),
               h.task->hook ? h.task->hook->profile : "-", h.task->health.has_value());
}

Change<int> HostService::agentTaskResult(const std::string& name,
                                         const model::HostTaskResult& reported) {
  const model::HostTaskResult r = boundedTaskResult(reported);
  Change<int> c;
  c.value = 0;
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end()) return c;
  model::Host& h = it->second;
  if (!h.task || h.task->id != r.id) {
    static ThrottledWarnings ignored("");  // as many as a host sends
    ignored.warn("host task result ignored: host={} id={} (not waited for)", name, r.id);
    return c;
  }
  const model::HostTask task = *h.task;
  // Taken now: the handover is reset below, whichever way the task went.
  const int64_t upgradeId = h.handover ? h.handover->upgradeId : 0;
  taskOutputs_.erase(name);
  c.value = 1;
  // Its desired state no longer names the task, so the agent stops reporting it.
  c.pushHosts.insert(name);
  if (r.ok && r.health) h.healthCheckedAt = clock_.nowMs();

  if (h.adminState == AdminState::kAvailable) {  // a periodic check of a host in service
    h.task.reset();
    if (r.ok) {
      c.batch.add(store::PutHost{h});
    } else {
      transitionHost(h, AdminState::kFailed, kSystemActor, failureReason(task, r), c.batch,
                     r.output);
    }
    return c;
  }
  if (h.adminState != AdminState::kCommissioning && h.adminState != AdminState::kReprovisioning) {
    h.task.reset();
    c.batch.add(store::PutHost{h});
    return c;
  }
  if (!r.ok) {
    // The handover stops here: the host stays with its previous owner, fenced, until an admin
    // looks (what the wipe or the hook left is not for the next team).
    h.handover.reset();
    const std::string why = failureReason(task, r);
    transitionHost(h, AdminState::kFailed, kSystemActor, why, c.batch, r.output);
    if (upgradeId) upgradeStepDone(upgradeId, name, false, why, c.batch, c.pushHosts);
    return c;
  }
  std::string reason =
      task.hook ? "reprovisioned with profile " + task.hook->profile : task.purpose + " done";
  if (h.adminState == AdminState::kCommissioning) reason = "commissioned";
  if (h.adminState == AdminState::kCommissioning && r.health) {
    // What it had when commissioned is what later checks expect.
    h.expectedGpuCount = r.health->gpuCount;
    h.expectedGpuModels = r.health->gpuModels;
  }
  if (h.handover && !h.handover->wipe) {
    reason = "upgrade " + std::to_string(h.handover->upgradeId) + ": " + reason;
    h.handover.reset();
  } else if (h.handover) {
    h.dedicatedTo = h.handover->team;
    // Nothing of the previous owner's settings either: GPU dedications and sharing start afresh.
    for (auto& g : h.gpus) {
      g.dedicatedTo.clear();
      g.shared = false;
    }
    reason = h.handover->team.empty() ? "returned to the shared pool"
                                      : "handed over to team " + h.handover->team;
    h.handover.reset();
  }
  transitionHost(h, AdminState::kAvailable, kSystemActor, reason, c.batch, r.output);
  if (upgradeId) upgradeStepDone(upgradeId, name, true, reason, c.batch, c.pushHosts);
  queueChanged_();
  return c;
}

void HostService::agentTaskOutput(const std::string& name, const model::TaskOutput& o) {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !it->second.task || it->second.task->id != o.id) return;
  TaskOutputView& v = taskOutputs_[name];
  if (v.taskId != o.id) v = TaskOutputView{o.id, true, 0, ""};
  const int64_t end = v.offset + static_cast<int64_t>(v.data.size());
  if (o.offset > end) return;  // a gap: wait for the agent to resend from what we hold
  const size_t skip = static_cast<size_t>(end - o.offset);
  if (skip >= o.data.size()) return;
  v.data.append(o.data, skip);
  if (v.data.size() > kMaxFollowedOutput) {
    const size_t cut = v.data.size() - kMaxFollowedOutput;
    v.data.erase(0, cut);
    v.offset += static_cast<int64_t>(cut);
  }
}

Result<HostService::TaskOutputView> HostService::taskOutput(const Principal& p,
                                                            const std::string& name,
                                                            int64_t offset) const {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  // What a host task prints may be any team's (its profile's output, the processes the wipe
  // killed): platform admins only, like the output in the record.
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "follow a host's task output"));
  if (offset < 0) return Status::InvalidArgument("offset: must not be negative", "offset");
  TaskOutputView out;
  // A handover still draining has no task yet, but one is coming: followers keep waiting.
  out.running = it->second.task.has_value() || it->second.handover.has_value();
  if (!it->second.task) return out;
  out.taskId = it->second.task->id;
  auto v = taskOutputs_.find(name);
  if (v == taskOutputs_.end() || v->second.taskId != out.taskId) return out;
  const int64_t end = v->second.offset + static_cast<int64_t>(v->second.data.size());
  out.offset = std::clamp(offset, v->second.offset, end);
  out.data = v->second.data.substr(static_cast<size_t>(out.offset - v->second.offset));
  return out;
}

Change<int> HostService::scheduleHealthChecks() {
  Change<int> c;
  c.value = 0;
  const int64_t every = options_.lifecycle.healthIntervalMs;
  if (every <= 0) return c;
  const TimeMs now = clock_.nowMs();
  for (auto& [name, h] : world_.hosts) {
    if (h.adminState != AdminState::kAvailable || h.task || h.state != model::HostState::kOnline ||
        now - h.healthCheckedAt < every)
      continue;
    // No burn-in: the host runs others' work, on GPUs the burn-in would compete for.
    model::HostTask task;
    task.purpose = "periodic health check";
    task.health = healthStep(h, false);
    startTask(h, std::move(task), c.batch);
    c.pushHosts.insert(name);
    ++c.value;
  }
  return c;
}

}  // namespace allot::control
