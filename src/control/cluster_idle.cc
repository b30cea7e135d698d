// Idle allocations: per-team and per-project policies, detection from live GPU telemetry, the
// events that tell owners, and reclaiming through the preemption path. See cluster.h and
// docs/accounting.md.
//
// Detection keeps, per running job, the last moment it was busy: any of its GPUs (every rank of a
// gang) at or above the threshold, or without a current reading (no news is not idleness). It is
// brought up to date on each telemetry round of the job's hosts and on each periodic check, so a
// host that goes silent makes its jobs busy rather than idle. Utilisation is GPU-wide: jobs
// sharing a GPU (fractions) see the GPU's utilisation, not their own.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

#include "common/time_format.h"
#include "control/authz.h"
#include "control/cluster.h"

namespace allot::control {

using model::Job;
using model::JobState;

namespace {

// Calls fn(host, gpuIndices) for each rank of a placed job.
template <typename F>
void forEachRank(const Job& j, F fn) {
  if (j.ranks.empty()) {
    fn(j.host, j.gpuIndices);
    return;
  }
  for (const auto& r : j.ranks) fn(r.host, r.gpuIndices);
}

// Jobs the detector watches: running on GPUs, or interactive sessions (which are culled when idle
// even without GPUs), and not already on their way out.
bool watched(const Job& j) {
  return j.state == JobState::kRunning && !j.evicting && !j.cancelRequested &&
         (j.gpus > 0 || j.session);
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

model::IdlePolicy Cluster::idlePolicyFor(const Job& j) const {
  model::IdlePolicy policy = effectiveIdlePolicyOf(j.team, j.project).policy;
  if (!j.session) return policy;
  // A session is culled under its profile's rule: idle for `after`, then stopped after a notice
  // of a quarter of that (at most ten minutes), so that its owner hears before it goes.
  policy.thresholdPct = j.session->idleThresholdPct;
  policy.afterMs = j.session->idleAfterMs;
  policy.action = model::IdleAction::kReclaim;
  policy.graceMs = std::min<int64_t>(j.session->idleAfterMs / 4, 600'000);
  return policy;
}

EffectiveIdlePolicy Cluster::effectiveIdlePolicyOf(const std::string& team,
                                                   const std::string& project) const {
  auto t = world_.teams.find(team);
  auto p = project.empty() ? world_.projects.end()
                           : world_.projects.find(World::projectKey(team, project));
  return effectiveIdlePolicy(options_.idleDefault, t == world_.teams.end() ? nullptr : &t->second,
                             p == world_.projects.end() ? nullptr : &p->second);
}

Result<EffectiveIdlePolicy> Cluster::idlePolicy(const Principal& p, const std::string& team,
                                                const std::string& project) const {
  if (!world_.teams.count(team) || !authz::canSeeTeam(p, team))
    return Status::NotFound("no team '" + team + "'");
  if (!project.empty() && !world_.projects.count(World::projectKey(team, project)))
    return Status::NotFound("no project '" + project + "' in team '" + team + "'");
  return effectiveIdlePolicyOf(team, project);
}

Result<Change<EffectiveIdlePolicy>> Cluster::setIdlePolicy(const Principal& p,
                                                           const std::string& team,
                                                           const std::string& project,
                                                           const IdlePolicyUpdate& u) {
  auto current = idlePolicy(p, team, project);
  if (!current.ok()) return current.status();
  ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, team));
  // Fields not given keep what the owner sees now, so `--threshold 10` changes only that.
  model::IdlePolicy next = current->policy;
  if (u.thresholdPct) next.thresholdPct = *u.thresholdPct;
  if (u.afterMs) next.afterMs = *u.afterMs;
  if (u.action) next.action = *u.action;
  if (u.graceMs) next.graceMs = *u.graceMs;
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

Result<Change<EffectiveIdlePolicy>> Cluster::clearProjectIdlePolicy(const Principal& p,
                                                                    const std::string& team,
                                                                    const std::string& project) {
  auto current = idlePolicy(p, team, project);
  if (!current.ok()) return current.status();
  ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, team));
  model::Project& pr = world_.projects.at(World::projectKey(team, project));
  Change<EffectiveIdlePolicy> c;
  if (pr.idlePolicy) {
    pr.idlePolicy.reset();
    c.batch.add(store::PutProject{pr});
  }
  c.value = effectiveIdlePolicyOf(team, project);
  return c;
}

IdleTrack& Cluster::trackIdle(const Job& j, TimeMs now) {
  auto [it, fresh] = idle_.try_emplace(j.id);
  IdleTrack& t = it->second;
  if (fresh || t.startedAt != j.startedAt) {
    // Starting counts as busy, and so does allotd's own start: it knows nothing from before.
    t = IdleTrack{};
    t.startedAt = j.startedAt;
    t.lastBusyAt = std::max(j.startedAt, idleEpoch_);
  }
  const double threshold = idlePolicyFor(j).thresholdPct;
  if (busyNow(world_, j, threshold, now)) t.lastBusyAt = now;
  if (j.session) {
    // A session is in use while a kernel runs or someone is connected, whatever its GPUs do;
    // Jupyter's own last activity (a request, kernel output) counts too. Before its agent has
    // said anything, or while its look at Jupyter gets no answer, it is busy: no news is not
    // idleness.
    auto rt = sessionRuntime_.find(j.id);
    if (rt == sessionRuntime_.end() || !rt->second.activityKnown || rt->second.connections > 0 ||
        rt->second.busyKernels > 0 || sessionRelays_.count(j.id))
      t.lastBusyAt = now;
    else if (rt->second.lastActivity > t.lastBusyAt)
      t.lastBusyAt = std::min(rt->second.lastActivity, now);
    if (auto p = sessionProxiedAt_.find(j.id); p != sessionProxiedAt_.end())
      t.lastBusyAt = std::max(t.lastBusyAt, std::min(p->second, now));
  }
  return t;
}

void Cluster::noteTelemetry(const std::string& host) {
  auto held = world_.hostJobs.find(host);
  if (held == world_.hostJobs.end()) return;
  const TimeMs now = clock_.nowMs();
  for (int64_t id : held->second) {
    const Job& j = world_.jobs.at(id);
    if (watched(j)) trackIdle(j, now);
  }
}

model::Event& Cluster::addEvent(model::EventKind kind, const Job& j, std::string message,
                                const nlohmann::json& details, store::WriteBatch& batch) {
  model::Event e;
  e.kind = kind;
  e.team = j.team;
  e.project = j.project;
  e.user = j.user;
  e.jobId = j.id;
  e.hosts = model::rankHosts(j);
  e.message = std::move(message);
  e.details = details.dump();
  return appendEvent(std::move(e), batch);
}

model::Event& Cluster::appendEvent(model::Event e, store::WriteBatch& batch) {
  e.id = world_.nextEventId++;
  e.at = clock_.nowMs();
  batch.add(store::AppendEvent{e});
  if (world_.events.size() >= store::kEventsLoaded) world_.events.pop_front();
  world_.events.push_back(std::move(e));
  return world_.events.back();
}

Change<IdleCheck> Cluster::checkIdleAllocations() {
  Change<IdleCheck> c;
  const TimeMs now = clock_.nowMs();
  // Tracks of jobs no longer watched (ended, requeued, being stopped) go: a later start is a new
  // episode.
  for (auto it = idle_.begin(); it != idle_.end();) {
    auto j = world_.jobs.find(it->first);
    it = j == world_.jobs.end() || !watched(j->second) ? idle_.erase(it) : std::next(it);
  }
  // Collected first: evicting edits hostJobs, and a gang is listed under each of its hosts.
  std::set<int64_t> ids;
  for (const auto& [host, held] : world_.hostJobs) ids.insert(held.begin(), held.end());
  for (int64_t id : ids) {
    Job& j = world_.jobs.at(id);
    if (!watched(j)) continue;
    const model::IdlePolicy policy = idlePolicyFor(j);
    IdleTrack& t = trackIdle(j, now);
    const IdleStep step = stepIdle(t, policy, now);
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
        c.value.events.push_back(addEvent(model::EventKind::kAllocationIdle, j, std::move(msg),
                                          policyDetails(policy, t), c.batch));
        spdlog::info("allocation idle: job={} team={} action={}", j.id, j.team,
                     model::idleActionName(policy.action));
        break;
      }
      case IdleStep::kBusyAgain:
        c.value.events.push_back(addEvent(model::EventKind::kAllocationBusyAgain, j,
                                          what + ": busy again", policyDetails(policy, t),
                                          c.batch));
        break;
      case IdleStep::kReclaim: {
        if (j.session) {
          // Culled: stopped like `allot session stop`, the reason kept on the session.
          const std::string reason =
              "culled: " + describeIdle(policy) + " with no kernel busy and no connection open";
          c.value.events.push_back(
              addEvent(model::EventKind::kAllocationReclaimed, j,
                       "session " + std::to_string(j.id) + " (" + j.user + "): " + reason,
                       policyDetails(policy, t), c.batch));
          Job before = j;
          j.cancelRequested = true;
          j.reason = reason;
          updateJob(j, before, c.batch);
          c.pushHosts.insert(j.host);
          c.value.reclaimed.push_back(j.id);
          spdlog::info("session culled: session={} user={}", j.id, j.user);
          break;
        }
        const std::string reason = "reclaimed: " + describeIdle(policy);
        c.value.events.push_back(
            addEvent(model::EventKind::kAllocationReclaimed, j,
                     what + ": " + reason + (j.preemptible ? "; requeued" : "; stopped"),
                     policyDetails(policy, t), c.batch));
        // The preemption path: the agent stops it with the preempt grace; a preemptible job goes
        // back to the queue, any other ends `preempted` with this reason.
        Change<std::vector<int64_t>> evicted;
        evict(sched::Eviction{j.id, j.preemptible, 0, reason}, evicted);
        for (auto& op : evicted.batch.ops) c.batch.ops.push_back(std::move(op));
        c.pushHosts.insert(evicted.pushHosts.begin(), evicted.pushHosts.end());
        c.value.reclaimed.push_back(j.id);
        break;
      }
    }
  }
  return c;
}

void Cluster::evictionsDurable(const std::vector<int64_t>& jobs) {
  for (int64_t id : jobs) evictionsInFlight_.erase(id);
}

std::optional<IdleAllocation> Cluster::idleFlag(int64_t jobId) const {
  auto t = idle_.find(jobId);
  auto j = world_.jobs.find(jobId);
  if (t == idle_.end() || !t->second.flagged() || j == world_.jobs.end() || !watched(j->second))
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
  a.thresholdPct = effectiveIdlePolicyOf(job.team, job.project).policy.thresholdPct;
  return a;
}

Result<std::vector<IdleAllocation>> Cluster::idleAllocations(const Principal& p,
                                                             const std::string& team) const {
  if (!team.empty() && (!world_.teams.count(team) || !authz::canSeeTeam(p, team)))
    return Status::NotFound("no team '" + team + "'");
  std::vector<IdleAllocation> out;
  for (const auto& [id, t] : idle_) {
    auto a = idleFlag(id);
    if (!a || (!team.empty() && a->team != team) || !authz::canSeeTeam(p, a->team)) continue;
    out.push_back(std::move(*a));
  }
  return out;
}

Result<std::vector<model::Event>> Cluster::events(const Principal& p, const EventFilter& f) const {
  if (!f.team.empty() && (!world_.teams.count(f.team) || !authz::canSeeTeam(p, f.team)))
    return Status::NotFound("no team '" + f.team + "'");
  std::vector<model::Event> out;
  for (auto it = world_.events.rbegin(); it != world_.events.rend() && out.size() < f.limit; ++it) {
    const model::Event& e = *it;
    if (e.at < f.since) break;  // appended in time order
    if (!f.team.empty() && e.team != f.team) continue;
    if (f.jobId != 0 && e.jobId != f.jobId) continue;
    if (f.kind && e.kind != *f.kind) continue;
    if (!authz::canSeeTeam(p, e.team)) continue;
    out.push_back(e);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

bool webhookAllowed(const std::vector<std::string>& allow, const std::string& url) {
  // A path that a receiver would resolve elsewhere ("/allot/../admin", or the same spelt with
  // %2e and %2f) could leave an allowed prefix: refused whatever the list says.
  std::string lower = url;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string path = lower.substr(std::min(lower.size(), lower.find('/', 7)));
  for (const char* bad : {"/./", "/../", "%2e", "%2f", "%5c", "\\"}) {
    if (path.find(bad) != std::string::npos) return false;
  }
  auto endsWith = [&](std::string_view tail) {
    return path.size() >= tail.size() &&
           path.compare(path.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (endsWith("/..") || endsWith("/.")) return false;
  // Each prefix ends in '/' after its host (checked when allotd reads its config), so a prefix
  // "http://hooks.example.com/" cannot match "http://hooks.example.com.evil.net/".
  return std::any_of(allow.begin(), allow.end(),
                     [&](const std::string& p) { return !p.empty() && url.rfind(p, 0) == 0; });
}

}  // namespace allot::control
