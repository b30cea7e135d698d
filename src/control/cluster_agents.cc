// Cluster operations driven by agents: their connections, reports, output and liveness, and the
// desired state allotd sends them. See cluster.h.

#include <spdlog/spdlog.h>

#include <cstdio>

#include "control/cluster.h"

namespace allot::control {

using model::Job;
using model::JobState;

// ---- Agents ------------------------------------------------------------------------------

std::string Cluster::desiredMessage(const std::string& host) {
  std::vector<model::DesiredJob> out;
  auto hj = world_.hostJobs.find(host);
  const auto& h = world_.hosts.at(host);
  if (hj != world_.hostJobs.end()) {
    for (int64_t id : hj->second) {
      if (placementsInFlight_.count(id)) continue;
      const Job& j = world_.jobs.at(id);
      model::DesiredJob d;
      d.id = j.id;
      d.command = j.command;
      d.env = j.env;
      if (j.gpuMilli < 1000 && !j.gpuIndices.empty()) {
        // A fraction of a shared GPU: say how much, so the job (or MPS, when the host runs its
        // daemon) can hold itself to it. Allot places fractions; it does not slice the GPU.
        char fraction[16];
        std::snprintf(fraction, sizeof fraction, "%g", j.gpuMilli / 1000.0);
        d.env["ALLOT_GPU_FRACTION"] = fraction;
        d.env.emplace("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string((j.gpuMilli + 9) / 10));
        for (const auto& g : h.gpus) {
          if (g.index == j.gpuIndices.front() && g.memoryMib > 0)
            d.env["ALLOT_GPU_MEMORY_MIB"] = std::to_string(g.memoryMib * j.gpuMilli / 1000);
        }
      }
      d.gpuIndices = j.gpuIndices;
      d.gpuUuids = j.gpuUuids;
      for (int idx : j.gpuIndices) {
        for (const auto& g : h.gpus) {
          if (g.index == idx) d.gpuMinors.push_back(g.minor);
        }
      }
      d.cpuMillis = j.cpuMillis;
      d.memoryMib = j.memoryMib;
      // A preempted job is stopped like a cancelled one, with the preemption grace.
      // An eviction not yet durable is not told: a crash before the commit would kill a job the
      // store still thinks runs.
      const bool evict = j.evicting && !evictionsInFlight_.count(j.id);
      d.cancel = j.cancelRequested || evict;
      d.graceMs = evict && !j.cancelRequested ? options_.preemptGraceMs : options_.cancelGraceMs;
      d.logOffset = logs_.size(j.id);
      out.push_back(std::move(d));
    }
  }
  return model::encodeDesired(out, options_.heartbeatMs);
}

void Cluster::push(const std::set<std::string>& hosts) {
  for (const auto& h : hosts) {
    auto it = links_.find(h);
    if (it != links_.end() && world_.hosts.count(h)) it->second->send(desiredMessage(h));
  }
}

Change<int> Cluster::agentConnected(const std::string& host, AgentLink* link,
                                    const model::Inventory& inv,
                                    const std::vector<model::ActualJob>& jobs) {
  Change<int> c;
  c.value = 0;
  auto& h = world_.hosts.at(host);
  links_[host] = link;
  h.state = model::HostState::kOnline;
  h.unreachableSince = 0;
  h.lastSeenAt = clock_.nowMs();
  // The agent's inventory is the truth about its hardware. GPUs that held jobs keep their
  // indexes; a GPU that vanished shows up as its jobs failing on the host.
  model::applyInventory(h, inv);
  c.batch.add(store::PutHost{h});
  spdlog::info("agent connected: host={} gpus={} jobs_reported={}", host, h.gpus.size(),
               jobs.size());

  std::set<int64_t> reported;
  for (const auto& a : jobs) {
    reported.insert(a.id);
    applyActual(host, a, c.batch, c.pushHosts);
  }
  // A job allotd thinks runs there but the agent does not know was lost with the agent's state.
  auto hj = world_.hostJobs[host];  // copy: finishing jobs edits the index
  for (int64_t id : hj) {
    Job& j = world_.jobs.at(id);
    if (j.state == JobState::kRunning && !reported.count(id)) {
      finishJob(j, JobState::kLost, "the agent on " + host + " no longer knows this job", c.batch);
    }
  }
  c.pushHosts.insert(host);
  if (onQueueChanged_) onQueueChanged_();
  return c;
}

Change<int> Cluster::agentStatus(const std::string& host,
                                 const std::vector<model::ActualJob>& jobs) {
  Change<int> c;
  c.value = 0;
  auto it = world_.hosts.find(host);
  if (it == world_.hosts.end()) return c;
  it->second.lastSeenAt = clock_.nowMs();
  for (const auto& a : jobs) applyActual(host, a, c.batch, c.pushHosts);
  return c;
}

void Cluster::applyActual(const std::string& host, const model::ActualJob& a,
                          store::WriteBatch& batch, std::set<std::string>& push) {
  auto it = world_.jobs.find(a.id);
  if (it == world_.jobs.end() || it->second.host != host || model::isTerminal(it->second.state)) {
    // Unknown here, ended here, or placed elsewhere: the agent stops and forgets it when it sees
    // the desired state without it.
    push.insert(host);
    return;
  }
  Job& j = it->second;
  Job before = j;
  switch (a.state) {
    case model::ActualState::kRunning:
      if (j.state == JobState::kScheduled) {
        j.state = JobState::kRunning;
        j.startedAt = a.startedAt ? a.startedAt : clock_.nowMs();
        updateJob(j, before, batch);
      }
      return;
    case model::ActualState::kExited: {
      // A requeued job placed again where it ran before: the agent may still report the exit of
      // the run that was preempted until it has seen the new desired state. That exit is older
      // than this placement.
      if (j.preemptions > 0 && a.finishedAt != 0 && a.finishedAt < j.scheduledAt) {
        push.insert(host);
        return;
      }
      j.exitCode = a.exitCode;
      j.signal = a.signal;
      if (!j.startedAt) j.startedAt = a.startedAt;
      j.finishedAt = a.finishedAt ? a.finishedAt : clock_.nowMs();
      std::string how = a.exitCode ? "exited with code " + std::to_string(*a.exitCode)
                        : a.signal ? "killed by signal " + std::to_string(*a.signal)
                                   : "stopped before it started";
      if (j.cancelRequested) {
        // The reason recorded when the cancel was asked for says why ("cancel requested by
        // alice", "exceeded its maximum runtime of 2h"); `how` says how it ended.
        finishJob(j, JobState::kCancelled, (j.reason.empty() ? "cancelled" : j.reason) + "; " + how,
                  batch);
      } else if (j.evicting) {
        preemptedJobStopped(j, how, batch);
      } else if (a.exitCode && *a.exitCode == 0) {
        finishJob(j, JobState::kSucceeded, how, batch);
      } else {
        finishJob(j, JobState::kFailed, how, batch);
      }
      push.insert(host);
      return;
    }
    case model::ActualState::kFailedToStart:
      j.finishedAt = a.finishedAt ? a.finishedAt : clock_.nowMs();
      finishJob(
          j, JobState::kFailed,
          "failed to start job " + std::to_string(j.id) + " on host " + host + ": " + a.message,
          batch);
      push.insert(host);
      return;
    case model::ActualState::kLost:
      finishJob(j, JobState::kLost, "lost on " + host + ": " + a.message, batch);
      push.insert(host);
      return;
  }
}

Status Cluster::agentLog(const std::string& host, const model::LogChunk& chunk) {
  auto it = world_.jobs.find(chunk.job);
  if (it == world_.jobs.end() || it->second.host != host)
    return Status::NotFound("no job " + std::to_string(chunk.job) + " on host " + host);
  return logs_.append(chunk.job, chunk.offset, chunk.data);
}

void Cluster::agentDisconnected(const std::string& host, AgentLink* link) {
  auto it = links_.find(host);
  if (it == links_.end() || it->second != link) return;  // a newer connection replaced it
  links_.erase(it);
  auto& h = world_.hosts.at(host);
  if (h.state == model::HostState::kOnline) {
    h.state = model::HostState::kUnreachable;
    h.unreachableSince = clock_.nowMs();
    spdlog::warn("host unreachable: host={} (agent disconnected)", host);
  }
}

Change<int> Cluster::checkLiveness() {
  Change<int> c;
  c.value = 0;
  auto now = clock_.nowMs();
  for (auto& [name, h] : world_.hosts) {
    if (h.state == model::HostState::kOnline && now - h.lastSeenAt > 3 * options_.heartbeatMs) {
      h.state = model::HostState::kUnreachable;
      h.unreachableSince = now;
      spdlog::warn("host unreachable: host={} (no heartbeat for {} ms)", name, now - h.lastSeenAt);
    }
    if (h.state != model::HostState::kUnreachable) continue;
    if (h.unreachableSince == 0) h.unreachableSince = now;  // loaded from the store after a restart
    if (now - h.unreachableSince < options_.lostAfterMs) continue;
    auto hj = world_.hostJobs[name];
    for (int64_t id : hj) {
      Job& j = world_.jobs.at(id);
      if (j.evicting && !j.cancelRequested) {
        // It was leaving anyway: requeue it (or end it as preempted) as if it had stopped.
        preemptedJobStopped(j, "its host " + name + " became unreachable", c.batch);
        ++c.value;
        continue;
      }
      finishJob(j, JobState::kLost,
                "host " + name + " unreachable for more than " +
                    std::to_string(options_.lostAfterMs / 1000) + "s",
                c.batch);
      ++c.value;
    }
  }
  return c;
}

}  // namespace allot::control
