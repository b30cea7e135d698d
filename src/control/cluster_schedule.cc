// Scheduling in the control plane: the snapshot the fleet scheduler decides on, built from the
// world; its decisions applied (placements, evictions, waits); and preempted jobs stopping.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/time_format.h"
#include "control/authz.h"
#include "control/cluster.h"
#include "sched/lease_hold.h"
#include "sched/quota/quota.h"

namespace allot::control {

using model::Job;
using model::JobState;

namespace {

// What the scheduler counts a job as holding of a host's CPU and memory: what it asked for, or
// the floor when it asked for none (JobLimits), so that jobs asking nothing cannot all pile onto
// one host. The agent still limits the job by what it asked for.
int64_t cpuCounted(const Job& j, const JobLimits& l) {
  return j.resources.cpuMillis > 0 ? j.resources.cpuMillis : l.cpuFloorMillis;
}
int64_t memoryCounted(const Job& j, const JobLimits& l) {
  return j.resources.memoryMib > 0 ? j.resources.memoryMib : l.memoryFloorMib;
}

// The scheduler's view of a queued job, filled into a default-constructed request: a pass builds
// one per queued job straight into its snapshot, without a temporary moved in and destroyed.
void fillRequest(sched::Request& r, const Job& j, const JobLimits& l) {
  r.id = j.id;
  r.team = j.team;
  r.project = j.project;
  r.priority = j.priority;
  r.preemptible = j.preemptible;
  r.submittedAt = j.submittedAt;
  r.gpus = j.resources.gpus;
  r.gpuMilli = j.resources.gpuMilli;
  r.gpuMemoryMib = j.resources.gpuMemoryMib;
  r.models = j.resources.gpuModels;
  r.cpuMillis = cpuCounted(j, l);
  r.memoryMib = memoryCounted(j, l);
  r.wholeHost = j.resources.wholeHost;
  r.hosts = j.resources.hosts;
  r.minDriver = j.resources.minDriver;
  r.minCuda = j.resources.minCuda;
  r.images = !j.image.empty();
  r.maxRuntimeMs = j.maxRuntimeMs;
  r.contour = j.contour;
}

sched::Request requestOf(const Job& j, const JobLimits& l) {
  sched::Request r;
  fillRequest(r, j, l);
  return r;
}

nlohmann::json waitJson(const sched::Wait& w, const sched::Request& r) {
  nlohmann::json out = {{"kind", sched::waitKindName(w.kind)},
                        {"reason", sched::describeWait(w, r)},
                        {"position", w.position}};
  if (w.kind == sched::WaitKind::kTooBig) out["largest_host_gpus"] = w.largest;
  if (w.kind == sched::WaitKind::kFragmented || w.kind == sched::WaitKind::kNoFreeGpus) {
    out["free_gpus_total"] = static_cast<double>(w.freeTotal) / sched::kMilliPerGpu;
    out["most_free_on_one_host"] = w.largest;
  }
  if (w.hostsWanted > 0) {
    out["gang_hosts_ready"] = w.hostsReady;
    out["gang_hosts_wanted"] = w.hostsWanted;
  }
  if (w.kind == sched::WaitKind::kHeldForLease) {
    out["held_host"] = w.host;
    out["lease"] = w.lease;
    out["lease_start"] = formatIso8601(w.startAt);
  } else {
    if (!w.host.empty()) out["reserved_host"] = w.host;
    if (w.startAt > 0) out["expected_start"] = formatIso8601(w.startAt);
  }
  if (!w.waitingFor.empty()) out["waiting_for_jobs"] = w.waitingFor;
  if (!w.outOfService.empty()) {
    nlohmann::json hosts = nlohmann::json::array();
    for (const auto& h : w.outOfService) {
      nlohmann::json one = {{"host", h.host}, {"state", h.state}};
      if (h.drainDeadline > 0) one["drain_deadline"] = formatIso8601(h.drainDeadline);
      hosts.push_back(std::move(one));
    }
    out["out_of_service_hosts"] = std::move(hosts);
  }
  if (!w.contour.empty()) out["contour"] = w.contour;
  if (w.kind == sched::WaitKind::kContourLimit) {
    out["contour_limit_gpus"] = static_cast<double>(w.limitMilli) / sched::kMilliPerGpu;
    out["contour_used_gpus"] = static_cast<double>(w.usedMilli) / sched::kMilliPerGpu;
  }
  if (w.kind == sched::WaitKind::kDriverTooOld || w.kind == sched::WaitKind::kCudaTooOld)
    out["newest_version"] = w.newest.empty() ? nlohmann::json(nullptr) : nlohmann::json(w.newest);
  return out;
}

// `configured`: the guarantee as set, which the pass scales down while it exceeds the pool.
nlohmann::json teamStatusJson(const std::string& team, const TeamQuotaStatus& t, int configured) {
  return {{"team", team},
          {"guaranteed_gpus", t.guaranteed},
          {"configured_guarantee_gpus", configured},
          {"within_guarantee_gpus", t.within},
          {"borrowed_gpus", t.borrowed},
          {"lendable_gpus", t.lendable},
          {"fair_share", t.share}};
}

bool waitsById(const sched::Wait& a, const sched::Wait& b) { return a.jobId < b.jobId; }

}  // namespace

std::map<std::string, Cluster::LeaseHold> Cluster::leaseHolds(TimeMs now) const {
  // Hosts of approved leases that start within the horizon are held from their start: only
  // work that ends by then may start there (docs/leases.md). A start already due holds too,
  // until the lease service hands the host over.
  std::map<std::string, LeaseHold> holds;
  for (const auto& [id, l] : leases_.all()) {
    if (l.state != model::LeaseState::kApproved || l.startAt > now + options_.leases.holdHorizonMs)
      continue;
    for (const auto& host : l.hosts) {
      auto [it, added] = holds.emplace(host, LeaseHold{l.startAt, id});
      if (!added && l.startAt < it->second.startAt) it->second = {l.startAt, id};
    }
  }
  return holds;
}

sched::HostView Cluster::hostView(const std::string& name, const model::Host& h,
                                  const std::map<std::string, LeaseHold>& holds) const {
  sched::HostView v;
  v.name = name;
  // Connectivity and the admin's word both have to allow it: a drained host keeps its agent.
  const bool online = h.state == model::HostState::kOnline;
  v.schedulable = online && h.adminState == model::AdminState::kAvailable;
  v.drained = online && !v.schedulable;
  if (v.drained) {
    v.outOfService = h.adminState == model::AdminState::kMaintenance
                         ? std::string("in maintenance")
                         : std::string(model::adminStateName(h.adminState));
    if (h.adminState == model::AdminState::kDraining) v.drainDeadline = h.drainDeadline;
  }
  v.cpuMillis = int64_t{h.cpus} * 1000;
  v.memoryMib = h.memoryMib;
  v.dedicatedTo = h.dedicatedTo;
  v.contour = h.contour;
  v.images = h.images;
  if (auto held = holds.find(name); held != holds.end()) {
    // 0 means "not held", so a lease starting at the epoch holds from 1 ms.
    v.heldFrom = std::max<TimeMs>(held->second.startAt, 1);
    v.heldLease = held->second.lease;
  }
  v.driverVersion = model::hostDriverVersion(h);
  v.cudaVersion = model::hostCudaVersion(h);
  v.gpus.reserve(h.gpus.size());
  for (const auto& g : h.gpus) {
    sched::GpuView gv;
    gv.index = g.index;
    gv.model = g.model;
    gv.memoryMib = g.memoryMib;
    gv.numaNode = g.numaNode;
    gv.nvlinkDomain = g.nvlinkDomain;
    gv.pcieSwitch = g.pcieSwitch;
    gv.shared = g.shared;
    gv.dedicatedTo = g.dedicatedTo;
    v.gpus.push_back(std::move(gv));
  }
  return v;
}

void Cluster::addTeams(sched::Snapshot& s) const {
  for (const auto& [name, t] : world_.teams) {
    sched::TeamView tv;
    tv.name = name;
    tv.guaranteed = t.quota.guaranteed;
    tv.borrowLimit = t.quota.borrowLimit;
    tv.lendLimit = t.quota.lendLimit;
    tv.weight = t.quota.weight;
    tv.lendDedicated = t.lendDedicated;
    tv.usageGpuSeconds = t.usageGpuSeconds;
    tv.contourLimits = t.quota.contourLimits;
    s.teams.push_back(std::move(tv));
  }
  for (const auto& [key, p] : world_.projects) {
    if (p.guaranteed.empty()) continue;
    for (auto& tv : s.teams) {
      if (tv.name == p.team) tv.projectSplits[p.name] = p.guaranteed;
    }
  }
}

sched::Snapshot Cluster::snapshot() const {
  sched::Snapshot s;
  s.now = clock_.nowMs();
  s.policy = options_.scheduling;
  const auto holds = leaseHolds(s.now);
  s.hosts.reserve(world_.hosts.size());
  for (const auto& [name, h] : world_.hosts) s.hosts.push_back(hostView(name, h, holds));
  addTeams(s);
  for (const auto& [host, ids] : world_.hostJobs()) {
    for (int64_t id : ids) {
      const Job& j = world_.job(id);
      if (host != firstRank(j).host)
        continue;  // a gang is listed under each of its hosts; take it once
      sched::RunningJob r;
      r.id = j.id;
      r.team = j.team;
      r.project = j.project;
      r.priority = j.priority;
      r.preemptible = j.preemptible;
      r.startedAt = j.scheduledAt;
      // Enforcement counts from the start and then gives the cancel grace.
      r.endsBy = j.maxRuntimeMs > 0 ? (j.startedAt ? j.startedAt : j.scheduledAt) + j.maxRuntimeMs +
                                          options_.cancelGraceMs
                                    : 0;
      // Leaving, as far as the scheduler is concerned: chosen as a victim, or stopping for a
      // cancel or a failed rank. Its GPUs are coming free, and it is no victim to choose.
      r.evicting = j.evicting || j.cancelRequested || j.failedRank >= 0;
      r.contour = j.contour;
      for (const auto& k : j.ranks) {
        sched::Slice slice{k.host, k.gpuIndices, j.resources.gpuMilli,
                           cpuCounted(j, options_.limits), memoryCounted(j, options_.limits)};
        if (j.resources.wholeHost) {
          // It holds the whole host, whatever its own limits say.
          const auto& h = world_.hosts.at(k.host);
          slice.cpuMillis = int64_t{h.cpus} * 1000;
          slice.memoryMib = h.memoryMib;
        }
        r.slices.push_back(std::move(slice));
      }
      s.running.push_back(std::move(r));
    }
  }
  s.pending.reserve(world_.queued().size());
  arrayWaits_.clear();
  std::map<int64_t, int> arrayRoom;
  std::optional<std::map<int64_t, int>> arrayActive;  // counted only when a limited task waits
  for (const auto& [id, queued] : world_.queued()) {
    const Job& j = *queued;
    if (blockedReason(j)) continue;  // held, or waiting for another job: not to be placed yet
    if (j.arrayLimit > 0) {
      if (!arrayActive) arrayActive = activeArrayTasks();
      if (!offerArrayTask(j, arrayRoom, *arrayActive)) continue;
    }
    fillRequest(s.pending.emplace_back(), j, options_.limits);
    // A local-storage session goes back to where its owner's home is, when there is room.
    if (j.session && j.session->storage == "local") {
      if (const auto* homes = sessions_.localHomesOf(j.user))
        s.pending.back().preferHosts.assign(homes->begin(), homes->end());
    }
    // A job in an image prefers, among equally good hosts, one whose cache holds it.
    if (!j.image.empty() && j.resources.hosts <= 1)
      s.pending.back().imageHosts = imageCache_.hostsHolding(j.image);
  }
  return s;
}

Change<int> Cluster::accountUsage(bool persist) {
  constexpr TimeMs kPersistEveryMs = 60'000;
  Change<int> c;
  c.value = 0;
  const TimeMs now = clock_.nowMs();
  std::map<std::string, int64_t> heldMilli;
  // Each job once, with the GPUs of all its ranks (a gang's on every host).
  for (const Job* job : world_.heldJobs()) {
    const Job& j = *job;
    size_t held = 0;
    for (const auto& k : j.ranks) held += k.gpuIndices.size();
    heldMilli[j.team] += int64_t{j.resources.gpuMilli} * static_cast<int64_t>(held);
  }
  for (auto& [name, t] : world_.teams) {
    if (t.usageAt == 0) t.usageAt = now;  // a new team, or history from before it was kept
    const TimeMs elapsed = now - t.usageAt;
    if (elapsed <= 0) continue;
    // advanceUsage is linear in the GPUs held, so milli-GPUs in and out keep fractions exact.
    auto held = heldMilli.find(name);
    const int milli = held == heldMilli.end() ? 0 : static_cast<int>(held->second);
    const double before = t.usageGpuSeconds;
    t.usageGpuSeconds = sched::quota::advanceUsage(t.usageGpuSeconds * sched::kMilliPerGpu, milli,
                                                   elapsed, options_.usageHalfLifeMs) /
                        sched::kMilliPerGpu;
    t.usageAt = now;
    if (!persist) continue;
    auto& last = usagePersistedAt_[name];
    if (now - last >= kPersistEveryMs && t.usageGpuSeconds != before) {
      last = now;
      c.batch.add(store::PutTeam{t});
      ++c.value;
    }
  }
  return c;
}

Change<std::optional<sched::Snapshot>> Cluster::beginPass() {
  Change<std::optional<sched::Snapshot>> c;
  accountUsage(/*persist=*/false);  // the liveness loop writes it
  if (world_.queued().empty()) {
    world_.waits.clear();
    world_.schedulerError.clear();  // a refusal after this is a new episode, announced again
    return c;
  }
  cancelUnsatisfiable(c.batch);
  c.value = snapshot();
  return c;
}

// finishPass() takes the waits sorted by job id, as this leaves them.
SchedulerFn Cluster::decider() const {
  return [decide = options_.decide](const sched::Snapshot& s) {
    auto d = decide(s);
    // Sorted where it decides, off the I/O thread: waitOf() looks jobs up by id.
    if (d.ok()) std::sort(d->waits.begin(), d->waits.end(), waitsById);
    return d;
  };
}

Change<FinishedPass> Cluster::schedulePass() {
  auto begun = beginPass();
  Change<FinishedPass> c;
  c.batch = std::move(begun.batch);
  if (!begun.value) return c;
  auto finished = finishPass(*begun.value, decider()(*begun.value));
  c.value = std::move(finished.value);
  c.absorb(std::move(finished));
  return c;
}

bool Cluster::quotasAsIn(const sched::Snapshot& s) const {
  if (s.teams.size() != world_.teams.size()) return false;
  sched::Snapshot now;
  addTeams(now);
  for (size_t i = 0; i < now.teams.size(); ++i) {
    // Fair-share usage moves all the time and only orders requests: not a change of quota.
    now.teams[i].usageGpuSeconds = s.teams[i].usageGpuSeconds;
    if (!(now.teams[i] == s.teams[i])) return false;
  }
  return true;
}

Change<FinishedPass> Cluster::finishPass(const sched::Snapshot& s,
                                         Result<sched::Decisions> decisions) {
  Change<FinishedPass> c;
  if (!decisions.ok()) {
    refuseSnapshot(decisions.status().message(), c.batch);
    return c;
  }
  world_.schedulerError.clear();
  // The decisions were made on `s`, perhaps on another thread while the world moved on. Only a
  // pass places work on hosts, so the room a placement took is still free (jobs that ended since
  // only left more). What can make one wrong is its job (cancelled, held, placed) or its hosts
  // (gone, offline, drained, dedicated, held for a lease, a GPU's sharing or dedication), each
  // compared with what the decision saw, or a team's quota: such decisions are dropped and decided
  // again.
  const bool quotasSame = quotasAsIn(s);
  std::unordered_map<std::string_view, const sched::HostView*> seen;
  if (!decisions->placements.empty() || !decisions->evictions.empty()) {
    seen.reserve(s.hosts.size());
    for (const auto& h : s.hosts) seen.emplace(h.name, &h);
  }
  // Lease holds as they are now, not at the snapshot's time: a hold that began since (its lease
  // came within the horizon) makes the host's view differ, and what was placed there is dropped.
  const TimeMs now = clock_.nowMs();
  std::optional<std::map<std::string, LeaseHold>> holds;
  auto holdsNow = [&]() -> const std::map<std::string, LeaseHold>& {
    if (!holds) holds = leaseHolds(now);
    return *holds;
  };
  std::map<std::string, bool> hostSame;
  auto hostAsSeen = [&](const std::string& name) {
    if (auto known = hostSame.find(name); known != hostSame.end()) return known->second;
    auto h = world_.hosts.find(name);
    auto before = seen.find(name);
    bool same = h != world_.hosts.end() && before != seen.end();
    if (same) same = hostView(name, h->second, holdsNow()) == *before->second;
    return hostSame[name] = same;
  };
  // The pass found the job would end before the lease holding a host starts, counting from the
  // snapshot's time; applied later, it must still.
  auto endsBeforeHolds = [&](const Job& j, const sched::Placement& pl) {
    return std::all_of(pl.slices.begin(), pl.slices.end(), [&](const sched::Slice& slice) {
      auto held = holdsNow().find(slice.host);
      return held == holdsNow().end() ||
             sched::endsBeforeLease(now, j.maxRuntimeMs, held->second.startAt);
    });
  };
  std::unordered_set<int64_t> dropped;  // placements decided but not made
  for (auto& pl : decisions->placements) {
    auto found = world_.jobs.find(pl.jobId);
    const bool jobSame = found != world_.jobs.end() && found->second.state == JobState::kQueued &&
                         !blockedReason(found->second);
    if (!quotasSame || !jobSame ||
        !std::all_of(pl.slices.begin(), pl.slices.end(),
                     [&](const sched::Slice& slice) { return hostAsSeen(slice.host); }) ||
        !endsBeforeHolds(found->second, pl)) {
      ++c.value.stale;
      dropped.insert(pl.jobId);
      continue;
    }
    Job& j = found->second;
    Job before = j;
    // One rank per slice, in the scheduler's order.
    j.ranks.clear();
    for (const sched::Slice& slice : pl.slices) {
      const auto& host = world_.hosts.at(slice.host);
      model::Rank k;
      k.host = slice.host;
      k.gpuIndices = slice.gpus;
      for (int idx : slice.gpus) {
        for (const auto& g : host.gpus) {
          if (g.index == idx) k.gpuUuids.push_back(g.uuid);
        }
      }
      c.pushHosts.insert(slice.host);
      j.ranks.push_back(std::move(k));
    }
    j.state = JobState::kScheduled;
    j.reason.clear();
    j.resources.gpuMilli =
        pl.slices.front().gpuMilli;  // a fraction raised for GPU memory is what it holds
    if (j.resources.wholeHost) j.resources.gpus = static_cast<int>(firstRank(j).gpuIndices.size());
    j.failedRank = -1;
    j.masterPort = 0;  // chosen anew on this placement's rank 0 host
    j.scheduledAt = now;
    updateJob(j, before, c.batch);
    c.value.placed.push_back(j.id);
    placementsInFlight_.insert(j.id);
    world_.placedBy[j.id] = std::move(pl);
  }
  // Evictions after the placements: one is made only while what it was decided for still holds.
  // Its victim still runs on hosts as the decision saw them (not requeued, ended, or stopping for
  // a cancel or a failed rank, whose end is already decided; its hosts not drained, handed over
  // or dedicated otherwise meanwhile), and the request it makes room for still wants it (queued
  // and not held, or placed by this very pass). Otherwise work would be stopped for nothing.
  auto stillWanted = [&](int64_t forJob) {
    if (forJob == 0) return true;
    if (dropped.count(forJob)) return false;
    auto f = world_.jobs.find(forJob);
    if (f == world_.jobs.end()) return false;
    if (f->second.state == JobState::kQueued) return !blockedReason(f->second);
    return placementsInFlight_.count(forJob) > 0;  // placed now, not yet durable
  };
  Change<std::vector<int64_t>> evictions;
  for (const auto& e : decisions->evictions) {
    auto it = world_.jobs.find(e.jobId);
    // A victim that ended meanwhile left the room it was to make: nothing to stop, nothing stale.
    if (it != world_.jobs.end() && model::isTerminal(it->second.state)) continue;
    const bool victimSame = it != world_.jobs.end() && model::holdsGpus(it->second.state) &&
                            !it->second.cancelRequested && it->second.failedRank < 0 &&
                            std::all_of(it->second.ranks.begin(), it->second.ranks.end(),
                                        [&](const model::Rank& k) { return hostAsSeen(k.host); });
    if (!quotasSame || !victimSame || !stillWanted(e.forJob)) {
      ++c.value.stale;
      continue;
    }
    const bool leavingBefore = it->second.evicting;
    evict(e, evictions);
    if (!leavingBefore && it->second.evicting) c.value.evicted.push_back(e.jobId);
  }
  c.absorb(std::move(evictions));
  if (c.value.stale > 0)
    spdlog::debug("scheduling pass: {} decisions dropped, the world changed while it decided",
                  c.value.stale);
  world_.waits = std::move(decisions->waits);
  world_.quotaStatus.clear();
  auto gpus = [](int milli) { return static_cast<double>(milli) / sched::kMilliPerGpu; };
  for (const auto& t : decisions->teams) {
    world_.quotaStatus[t.team] = {gpus(t.guaranteedMilli),
                                  gpus(t.withinMilli),
                                  gpus(t.borrowedMilli),
                                  gpus(t.lendableMilli),
                                  t.share / sched::kMilliPerGpu,  // in GPUs, like the rest
                                  true};
  }
  return c;
}

void Cluster::refuseSnapshot(const std::string& error, store::WriteBatch& batch) {
  // A snapshot the scheduler cannot model places nothing for anyone (a bug, or a fleet beyond
  // what it models): said where users and admins look, never only in a log line. Every queued
  // job waits with the reason; the metric counts the passes; admins get one event per error.
  ++world_.refusedPasses;
  world_.waits.clear();
  for (const auto& [id, queued] : world_.queued()) {
    sched::Wait w;
    w.jobId = id;
    w.kind = sched::WaitKind::kSchedulerError;
    world_.waits.push_back(std::move(w));
  }
  if (world_.schedulerError == error) return;
  world_.schedulerError = error;
  spdlog::error("scheduling pass refused its snapshot: {}", error);
  model::Event e;
  e.kind = model::EventKind::kSchedulerError;
  e.message = "nothing can be placed: the scheduling pass refused the fleet's state: " + error;
  e.details = nlohmann::json{{"error", error}, {"queued_jobs", world_.queued().size()}}.dump();
  events_.append(std::move(e), batch);
}

void Cluster::evict(const sched::Eviction& e, Change<std::vector<int64_t>>& c) {
  auto it = world_.jobs.find(e.jobId);
  // A job being cancelled, or a gang whose rank failed, is stopping already and ends as that says:
  // an eviction would overwrite its reason and turn a failure into a requeue.
  if (it == world_.jobs.end() || it->second.evicting || model::isTerminal(it->second.state) ||
      it->second.cancelRequested || it->second.failedRank >= 0)
    return;
  Job& j = it->second;
  Job before = j;
  j.evicting = true;
  j.evictingSince = clock_.nowMs();
  evictionsInFlight_.insert(j.id);
  j.evictedFor = e.reason;
  j.reason = "preempted: " + e.reason + (e.requeue ? "; it will be requeued" : "") +
             " (stopping, grace " + std::to_string(options_.preemptGraceMs / 1000) + "s)";
  updateJob(j, before, c.batch);
  for (const auto& h : model::rankHosts(j)) c.pushHosts.insert(h);
  spdlog::info("preempting job {} on {}: {}", j.id, firstRank(j).host, e.reason);
}

void Cluster::preemptedJobStopped(Job& j, const std::string& how, store::WriteBatch& batch) {
  const bool asked = !j.requeueRequestedBy.empty();  // allot job requeue, not a preemption
  if (!j.preemptible && !asked) {
    finishJob(j, JobState::kPreempted, "preempted: " + j.evictedFor + "; " + how, batch);
    return;
  }
  Job before = j;
  j.state = JobState::kQueued;
  j.reason = asked ? j.evictedFor : "requeued after preemption (" + j.evictedFor + ")";
  for (const auto& h : model::rankHosts(j)) lastRunOn_[j.id].insert(h);
  j.requeueRequestedBy.clear();
  j.ranks.clear();
  j.failedRank = -1;
  j.exitCode.reset();
  j.signal.reset();
  j.evicting = false;
  j.evictingSince = 0;
  j.scheduledAt = 0;
  j.startedAt = 0;
  j.finishedAt = 0;
  if (!asked) ++j.preemptions;
  updateJob(j, before, batch);
  if (onQueueChanged_) onQueueChanged_();
}

void Cluster::passDurable(const FinishedPass& pass) {
  for (int64_t id : pass.placed) placementsInFlight_.erase(id);
  // Only this pass's own: drains, idle reclaims and requeues release theirs after their commits.
  evictionsDurable(pass.evicted);
}

std::optional<sched::Wait> Cluster::waitOf(int64_t id) const {
  auto it = std::lower_bound(world_.waits.begin(), world_.waits.end(), id,
                             [](const sched::Wait& w, int64_t v) { return w.jobId < v; });
  if (it == world_.waits.end() || it->jobId != id) return std::nullopt;
  auto job = world_.jobs.find(id);
  if (job == world_.jobs.end() || job->second.state != JobState::kQueued) return std::nullopt;
  return *it;
}

std::string Cluster::waitReason(const Job& job) const {
  if (job.state == JobState::kQueued) {
    if (auto blocked = blockedReason(job)) return *blocked;
    if (auto limited = arrayLimitReason(job)) return *limited;
  }
  auto w = waitOf(job.id);
  return w ? sched::describeWait(*w, requestOf(job, options_.limits)) : job.reason;
}

Result<nlohmann::json> Cluster::explainJob(const Principal& p, int64_t id) const {
  auto it = world_.jobs.find(id);
  if (it == world_.jobs.end() || !authz::canSeeJob(p, it->second))
    return Status::NotFound("no job " + std::to_string(id));
  const Job& j = it->second;
  nlohmann::json out = {{"job", j.id}, {"state", model::jobStateName(j.state)}};
  // A minimum the job did not ask for: its image's (NVIDIA_REQUIRE_CUDA).
  if (!j.imageMinCuda.empty())
    out["image_min_cuda"] = {{"cuda", j.imageMinCuda},
                             {"reason", "its image " + j.image + " needs CUDA " + j.imageMinCuda +
                                            " (NVIDIA_REQUIRE_CUDA): only hosts whose driver "
                                            "has it may run it"}};
  if (auto ts = world_.quotaStatus.find(j.team); ts != world_.quotaStatus.end()) {
    int configured = 0;
    if (auto t = world_.teams.find(j.team); t != world_.teams.end()) {
      for (const auto& [model, n] : t->second.quota.guaranteed) configured += n;
    }
    out["team_quota"] = teamStatusJson(j.team, ts->second, configured);
  }
  if (j.state == JobState::kQueued) {
    if (auto blocked = blockedReason(j)) {
      const char* kind = !j.heldBy.empty()        ? "held"
                         : lastRunOn_.count(j.id) ? "requeued"
                                                  : "dependency";
      out["wait"] = {{"kind", kind}, {"reason", *blocked}};
    } else if (auto limited = arrayLimitReason(j)) {
      out["wait"] = {{"kind", "array_limit"}, {"reason", *limited}};
    } else if (auto w = waitOf(id)) {
      out["wait"] = waitJson(*w, requestOf(j, options_.limits));
    } else {
      out["wait"] = {{"kind", "not_yet_considered"}, {"reason", j.reason}};
    }
    return out;
  }
  if (auto pl = world_.placedBy.find(id); pl != world_.placedBy.end()) {
    const sched::Placement& p = pl->second;
    auto gpus = [](int milli) { return static_cast<double>(milli) / sched::kMilliPerGpu; };
    nlohmann::json placed = {{"by", sched::placedByName(p.by)},
                             {"within_guarantee_gpus", gpus(p.withinMilli)},
                             {"borrowed_gpus", gpus(p.borrowedMilli)},
                             {"policy", options_.scheduling.placement}};
    nlohmann::json slices = nlohmann::json::array();
    for (const auto& s : p.slices) {
      slices.push_back({{"host", s.host}, {"gpus", s.gpus}, {"gpu_milli", s.gpuMilli}});
    }
    placed["slices"] = std::move(slices);
    if (p.reservedFor != 0) placed["backfilled_before_job"] = p.reservedFor;
    if (p.imageCached) placed["image_cached"] = true;
    out["placement"] = std::move(placed);
  }
  if (j.evicting) out["evicting"] = {{"for", j.evictedFor}};
  if (!j.reason.empty()) out["reason"] = j.reason;
  return out;
}

void Cluster::evictionsDurable(const std::vector<int64_t>& jobs) {
  for (int64_t id : jobs) evictionsInFlight_.erase(id);
}

}  // namespace allot::control
