// Idle allocations: policies, detection and reclaiming. See idle_service.h and
// docs/accounting.md.

#include "control/idle/idle_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

#include "common/time_format.h"
#include "control/authz.h"

namespace allot::control {

using model::Job;
using model::JobState;

namespace {

// Calls fn(host, gpuIndices) for each rank of a placed job.
template <typename F>
void forEachRank(const Job& j, F fn) {
  for (const auto& r : j.ranks) fn(r.host, r.gpuIndices);
}

// Jobs the detector watches: running on GPUs, or interactive sessions (which are culled when idle
// even without GPUs), and not already on their way out.
bool watched(const Job& j) {
  return j.state == JobState::kRunning && !j.evicting && !j.cancelRequested &&
         (j.resources.gpus > 0 || j.session);
}

int gpusHeld(const Job& j) {
  int n = 0;
  forEachRank(j, [&](const std::string&, const std::vector<int>& g) { n += g.size(); });
  return n;
}

bool busyNow(const World& w, const Job& j, double thresholdPct, TimeMs now) {
  bool busy = false;
  forEachRank(j, [&](const std::string& host, const std::vector<int>& gpus) {
    for (int g : gpus) {
      const GpuTelemetry* t = w.freshTelemetry(host, g, now);
      if (!t || !t->sample.utilizationPct || *t->sample.utilizationPct >= thresholdPct) busy = true;
    }
  });
  return busy;
}

nlohmann::json policyDetails(const model::IdlePolicy& p, const IdleTrack& t) {
  return {{"threshold_percent", p.thresholdPct},
          {"after", formatDurationSpec(p.afterMs)},
          {"action", model::idleActionName(p.action)},
          {"grace", formatDurationSpec(p.graceMs)},
          {"idle_since", t.idleSince ? nlohmann::json(formatIso8601(t.idleSince)) : nullptr},
          {"reclaim_at", t.reclaimAt ? nlohmann::json(formatIso8601(t.reclaimAt)) : nullptr}};
}

}  // namespace

model::IdlePolicy IdleService::policyFor(const Job& j) const {
  model::IdlePolicy policy = effectivePolicyOf(j.team, j.project).policy;
  if (!j.session) return policy;
  // A session is culled under its profile's rule: idle for `after`, then stopped after a notice
  // of a quarter of that (at most ten minutes), so that its owner hears before it goes.
  policy.thresholdPct = j.session->idleThresholdPct;
  policy.afterMs = j.session->idleAfterMs;
  policy.action = model::IdleAction::kReclaim;
  policy.graceMs = std::min<int64_t>(j.session->idleAfterMs / 4, 600'000);
  return policy;
}

EffectiveIdlePolicy IdleService::effectivePolicyOf(const std::string& team,
                                                   const std::string& project) const {
  auto t = world_.teams.find(team);
  auto p = project.empty() ? world_.projects.end()
                           : world_.projects.find(World::projectKey(team, project));
  return effectiveIdlePolicy(options_.platformDefault,
                             t == world_.teams.end() ? nullptr : &t->second,
                             p == world_.projects.end() ? nullptr : &p->second);
}

Result<EffectiveIdlePolicy> IdleService::policy(const Principal& p, const std::string& team,
                                                const std::string& project) const {
  if (!world_.teams.count(team) || !authz::canSeeTeam(p, team))
    return Status::NotFound("no team '" + team + "'");
  if (!project.empty() && !world_.projects.count(World::projectKey(team, project)))
    return Status::NotFound("no project '" + project + "' in team '" + team + "'");
  return effectivePolicyOf(team, project);
}

Result<Change<EffectiveIdlePolicy>> IdleService::setPolicy(const Principal& p,
                                                           const std::string& team,
                                                           const std::string& project,
                                                           const IdlePolicyUpdate& u) {
  auto current = policy(p, team, project);
  if (!current.ok()) return current.status();
  ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, team));
  // Fields not given keep what the owner sees now, so `--threshold 10` changes only that.
  model::IdlePolicy next = current->policy;
  if (u.thresholdPct) next.thresholdPct = *u.thresholdPct;
  if (u.afterMs) next.afterMs = *u.afterMs;
  if (u.action) next.action = *u.action;
  if (u.graceMs) next.graceMs = *u.graceMs;
  // The platform's webhook is the admins' (it may carry a secret), not the team's to keep: a
  // team's first policy starts without it, and its events still go there while it sets none
  // (Controllers::idle).
  if (current->source == PolicySource::kPlatform) next.webhook.clear();
  if (u.webhook) next.webhook = *u.webhook;
  ALLOT_RETURN_IF_ERROR(validateIdlePolicy(next));
  // allotd posts to the webhook from inside the network: only where platform admins allow, never
  // at its own loopback routes or another internal service a team-admin picks.
  if (u.webhook && !u.webhook->empty() && !webhookAllowed(options_.webhookAllow, *u.webhook)) {
    std::string allowed;
    for (const auto& a : options_.webhookAllow) allowed += (allowed.empty() ? "" : ", ") + a;
    return Status::InvalidArgument(
        allowed.empty() ? "webhook: platform admins allow no webhook targets ([idle] "
                          "webhook_allow in allotd.toml is empty)"
                        : "webhook: not under a target platform admins allow (" + allowed + ")",
        "webhook");
  }

  Change<EffectiveIdlePolicy> c;
  if (project.empty()) {
    model::Team& t = world_.teams.at(team);
    t.idlePolicy = next;
    c.batch.add(store::PutTeam{t});
    c.value = {next, PolicySource::kTeam};
  } else {
    model::Project& pr = world_.projects.at(World::projectKey(team, project));
    pr.idlePolicy = next;
    c.batch.add(store::PutProject{pr});
    c.value = {next, PolicySource::kProject};
  }
  spdlog::info("idle policy set: team={} project={} action={} by={}", team, project,
               model::idleActionName(next.action), p.name);
  return c;
}

Result<Change<EffectiveIdlePolicy>> IdleService::clearProjectPolicy(const Principal& p,
                                                                    const std::string& team,
                                                                    const std::string& project) {
  auto current = policy(p, team, project);
  if (!current.ok()) return current.status();
  ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, team));
  model::Project& pr = world_.projects.at(World::projectKey(team, project));
  Change<EffectiveIdlePolicy> c;
  if (pr.idlePolicy) {
    pr.idlePolicy.reset();
    c.batch.add(store::PutProject{pr});
  }
  c.value = effectivePolicyOf(team, project);
  return c;
}

IdleTrack& IdleService::track(const Job& j, TimeMs now) {
  auto [it, fresh] = tracks_.try_emplace(j.id);
  IdleTrack& t = it->second;
  if (fresh || t.startedAt != j.startedAt) {
    // Starting counts as busy, and so does allotd's own start: it knows nothing from before.
    t = IdleTrack{};
    t.startedAt = j.startedAt;
    t.lastBusyAt = std::max(j.startedAt, epoch_);
  }
  const double threshold = policyFor(j).thresholdPct;
  if (busyNow(world_, j, threshold, now)) t.lastBusyAt = now;
  if (j.session) {
    // A session is in use while a kernel runs or someone is connected, whatever its GPUs do;
    // Jupyter's own last activity (a request, kernel output) counts too. Before its agent has
    // said anything, or while its look at Jupyter gets no answer, it is busy: no news is not
    // idleness.
    const auto rt = sessions_.runtime(j.id);
    if (!rt || !rt->activityKnown || rt->connections > 0 || rt->busyKernels > 0 ||
        sessions_.relays(j.id) > 0)
      t.lastBusyAt = now;
    else if (rt->lastActivity > t.lastBusyAt)
      t.lastBusyAt = std::min(rt->lastActivity, now);
    if (const TimeMs at = sessions_.proxiedAt(j.id); at > 0)
      t.lastBusyAt = std::max(t.lastBusyAt, std::min(at, now));
  }
  return t;
}

void IdleService::samplesArrived(const std::string& host) {
  auto held = world_.hostJobs().find(host);
  if (held == world_.hostJobs().end()) return;
  const TimeMs now = clock_.nowMs();
  for (int64_t id : held->second) {
    const Job& j = world_.job(id);
    if (watched(j)) track(j, now);
  }
}

Change<IdleCheck> IdleService::check() {
  Change<IdleCheck> c;
  const TimeMs now = clock_.nowMs();
  // Tracks of jobs no longer watched (ended, requeued, being stopped) go: a later start is a new
  // episode.
  for (auto it = tracks_.begin(); it != tracks_.end();) {
    const Job* j = world_.findJob(it->first);
    it = j == nullptr || !watched(*j) ? tracks_.erase(it) : std::next(it);
  }
  // A copy: evicting edits the index.
  for (Job* held : world_.heldJobs()) {
    Job& j = *held;
    if (!watched(j)) continue;
    const model::IdlePolicy policy = policyFor(j);
    IdleTrack& t = track(j, now);
    const IdleStep step = stepIdle(t, policy, now);
    if (step == IdleStep::kNone) continue;
    const std::string what =
        (j.session ? "session " : "job ") + std::to_string(j.id) + " (" + j.user + ")";
    switch (step) {
      case IdleStep::kNone:
        break;
      case IdleStep::kFlag: {
        std::string msg = what + ": " + describeIdle(policy);
        if (t.reclaimAt && j.session)
          msg += ", no kernel busy and no connection open; it will be stopped at " +
                 formatIso8601(t.reclaimAt) + " unless it is used";
        else if (t.reclaimAt)
          msg += "; its GPUs will be reclaimed at " + formatIso8601(t.reclaimAt) +
                 " unless it gets busy";
        c.value.events.push_back(events_.appendForJob(model::EventKind::kAllocationIdle, j,
                                                      std::move(msg), policyDetails(policy, t),
                                                      c.batch));
        spdlog::info("allocation idle: job={} team={} action={}", j.id, j.team,
                     model::idleActionName(policy.action));
        break;
      }
      case IdleStep::kBusyAgain:
        c.value.events.push_back(events_.appendForJob(model::EventKind::kAllocationBusyAgain, j,
                                                      what + ": busy again",
                                                      policyDetails(policy, t), c.batch));
        break;
      case IdleStep::kReclaim: {
        if (j.session) {
          // Culled: stopped like `allot session stop`, the reason kept on the session.
          const std::string reason =
              "culled: " + describeIdle(policy) + " with no kernel busy and no connection open";
          c.value.events.push_back(events_.appendForJob(
              model::EventKind::kAllocationReclaimed, j,
              "session " + std::to_string(j.id) + " (" + j.user + "): " + reason,
              policyDetails(policy, t), c.batch));
          Job before = j;
          j.cancelRequested = true;
          j.reason = reason;
          jobs_.jobUpdated(j, before, c.batch);
          c.pushHosts.insert(firstRank(j).host);
          c.value.reclaimed.push_back(j.id);
          spdlog::info("session culled: session={} user={}", j.id, j.user);
          break;
        }
        const std::string reason = "reclaimed: " + describeIdle(policy);
        c.value.events.push_back(events_.appendForJob(
            model::EventKind::kAllocationReclaimed, j,
            what + ": " + reason + (j.preemptible ? "; requeued" : "; stopped"),
            policyDetails(policy, t), c.batch));
        // The preemption path: the agent stops it with the preempt grace; a preemptible job goes
        // back to the queue, any other ends `preempted` with this reason.
        Change<std::vector<int64_t>> evicted;
        preemption_.evict(sched::Eviction{j.id, j.preemptible, 0, reason}, evicted);
        c.absorb(std::move(evicted));
        c.value.reclaimed.push_back(j.id);
        break;
      }
    }
  }
  return c;
}

std::optional<IdleAllocation> IdleService::flag(int64_t jobId) const {
  auto t = tracks_.find(jobId);
  auto j = world_.jobs.find(jobId);
  if (t == tracks_.end() || !t->second.flagged() || j == world_.jobs.end() || !watched(j->second))
    return std::nullopt;
  const Job& job = j->second;
  IdleAllocation a;
  a.jobId = job.id;
  a.team = job.team;
  a.project = job.project;
  a.user = job.user;
  a.hosts = model::rankHosts(job);
  a.gpus = gpusHeld(job);
  a.idleSince = t->second.idleSince;
  a.notifiedAt = t->second.notifiedAt;
  a.reclaimAt = t->second.reclaimAt;
  a.thresholdPct = effectivePolicyOf(job.team, job.project).policy.thresholdPct;
  return a;
}

Result<std::vector<IdleAllocation>> IdleService::flagged(const Principal& p,
                                                         const std::string& team) const {
  if (!team.empty() && (!world_.teams.count(team) || !authz::canSeeTeam(p, team)))
    return Status::NotFound("no team '" + team + "'");
  std::vector<IdleAllocation> out;
  for (const auto& [id, t] : tracks_) {
    auto a = flag(id);
    if (!a || (!team.empty() && a->team != team) || !authz::canSeeTeam(p, a->team)) continue;
    out.push_back(std::move(*a));
  }
  return out;
}

}  // namespace allot::control
