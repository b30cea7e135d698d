// Job controls Slurm users rely on: hold and release (scontrol hold/release), requeue
// (scontrol requeue), and dependencies between jobs (--dependency afterok:ID). docs/jobs.md.

#include <spdlog/spdlog.h>

#include "control/authz.h"
#include "control/cluster.h"

namespace allot::control {

using model::Job;
using model::JobState;

namespace {

// "succeed", "end other than succeeding", "end": what a dependency waits for.
std::string awaited(model::DependencyKind k) {
  switch (k) {
    case model::DependencyKind::kAfterOk:
      return "succeed";
    case model::DependencyKind::kAfterNotOk:
      return "end without succeeding";
    case model::DependencyKind::kAfterAny:
      return "end";
  }
  return "end";
}

}  // namespace

Result<Job*> Cluster::jobToControl(const Principal& p, int64_t id) {
  auto it = world_.jobs.find(id);
  if (it == world_.jobs.end() || !authz::canSeeJob(p, it->second))
    return Status::NotFound("no job " + std::to_string(id));
  ALLOT_RETURN_IF_ERROR(authz::canCancelJob(p, it->second));
  return &it->second;
}

Status Cluster::checkDependencies(const Principal& p,
                                  const std::vector<model::Dependency>& deps) const {
  if (deps.size() > kMaxDependencies)
    return Status::InvalidArgument(
        "dependencies: at most " + std::to_string(kMaxDependencies) + " jobs", "dependencies");
  for (const auto& d : deps) {
    auto it = world_.jobs.find(d.job);
    // Another team's job is as absent as one that never was.
    if (it == world_.jobs.end() || !authz::canSeeJob(p, it->second))
      return Status::NotFound("dependencies: no job " + std::to_string(d.job), "dependencies");
  }
  return Status::Ok();
}

std::optional<std::string> Cluster::blockedReason(const Job& j) const {
  if (!j.heldBy.empty())
    return "held by " + j.heldBy + "; allot job release " + std::to_string(j.id) +
           " lets it be scheduled";
  if (auto last = lastRunOn_.find(j.id); last != lastRunOn_.end()) {
    for (const auto& h : last->second) {
      auto host = world_.hosts.find(h);
      // A host an admin set failed or retired holds nothing back: its agent's word that it still
      // runs the job (an honest agent's, or a compromised host's that would keep the job from
      // running anywhere) no longer counts, and the job may run elsewhere.
      if (host != world_.hosts.end() && host->second.state == model::HostState::kOnline &&
          host->second.adminState != model::AdminState::kFailed &&
          host->second.adminState != model::AdminState::kRetired)
        return j.reason + "; waits for host " + h +
               " to let go of its last run (or for a platform admin's `allot host fail " + h + "`)";
    }
  }
  for (const auto& d : j.dependencies) {
    auto it = world_.jobs.find(d.job);
    if (it == world_.jobs.end()) continue;  // gone from the store: nothing to wait for
    if (!model::dependencyHolds(d, it->second.state).has_value())
      return "waits for job " + std::to_string(d.job) + " to " + awaited(d.kind) + " (" +
             model::dependencyKindName(d.kind) + "; it is " +
             model::jobStateName(it->second.state) + ")";
  }
  return std::nullopt;
}

void Cluster::cancelUnsatisfiable(store::WriteBatch& batch) {
  std::vector<int64_t> doomed;
  std::map<int64_t, std::string> why;
  for (int64_t id : world_.queuedWithDependencies()) {
    const Job& j = world_.job(id);
    for (const auto& d : j.dependencies) {
      auto it = world_.jobs.find(d.job);
      if (it == world_.jobs.end()) continue;
      if (model::dependencyHolds(d, it->second.state) == false) {
        doomed.push_back(id);
        why[id] = "dependency never satisfied: job " + std::to_string(d.job) + " " +
                  model::jobStateName(it->second.state) + ", and it was to " + awaited(d.kind) +
                  " (" + model::dependencyKindName(d.kind) + ")";
        break;
      }
    }
  }
  // Cancelled after the walk: finishing a job changes the queue being walked.
  for (int64_t id : doomed) {
    Job& j = world_.job(id);
    spdlog::info("job {}: {}", id, why[id]);
    finishJob(j, JobState::kCancelled, why[id], batch);
  }
}

Result<Change<Job>> Cluster::holdJob(const Principal& p, int64_t id) {
  auto found = jobToControl(p, id);
  if (!found.ok()) return found.status();
  Job& j = **found;
  if (j.state != JobState::kQueued)
    return Status::FailedPrecondition("job " + std::to_string(id) + " is " +
                                      model::jobStateName(j.state) +
                                      "; only a queued job can be held (requeue a running one)");
  Change<Job> c;
  if (j.heldBy.empty()) {
    Job before = j;
    j.heldBy = p.name;
    updateJob(j, before, c.batch);
    if (onQueueChanged_) onQueueChanged_();  // what was held for it goes to others
  }
  c.value = j;
  c.value.reason = *blockedReason(j);
  return c;
}

Result<Change<Job>> Cluster::releaseJob(const Principal& p, int64_t id) {
  auto found = jobToControl(p, id);
  if (!found.ok()) return found.status();
  Job& j = **found;
  if (j.heldBy.empty())
    return Status::FailedPrecondition("job " + std::to_string(id) + " is not held");
  Change<Job> c;
  Job before = j;
  j.heldBy.clear();
  updateJob(j, before, c.batch);
  if (onQueueChanged_) onQueueChanged_();
  c.value = j;
  c.value.reason = waitReason(j);
  return c;
}

Result<Change<Job>> Cluster::requeueJob(const Principal& p, int64_t id) {
  auto found = jobToControl(p, id);
  if (!found.ok()) return found.status();
  Job& j = **found;
  if (j.session)
    return Status::FailedPrecondition("job " + std::to_string(id) +
                                      " is a session; stop it and create another");
  if (!model::holdsGpus(j.state))
    return Status::FailedPrecondition(
        "job " + std::to_string(id) + " is " + model::jobStateName(j.state) +
        "; only a scheduled or running job can be requeued" +
        (model::isTerminal(j.state) ? " (submit it again: allot run)" : ""));
  if (j.cancelRequested)
    return Status::FailedPrecondition("job " + std::to_string(id) + " is being cancelled");
  Change<Job> c;
  if (j.requeueRequestedBy.empty() && !j.evicting) {
    Job before = j;
    j.requeueRequestedBy = p.name;
    updateJob(j, before, c.batch);
    // Stopped through the preemption path (SIGTERM, then SIGKILL after the grace), which puts
    // it back in the queue once its agent says it stopped (preemptedJobStopped).
    Change<std::vector<int64_t>> stop;
    evict(sched::Eviction{id, true, 0, "requeued by " + p.name}, stop);
    c.absorb(std::move(stop));
  }
  c.value = j;
  return c;
}

}  // namespace allot::control
