// Leases on the clock: every second (the control loop) allotd starts the leases whose start
// has come, ends those whose end has, and tells the owners of jobs that a start will preempt.
// Everything it decides is in the lease's stored document, so an allotd restart resumes it: a
// start missed while allotd was down happens on its first tick back. See docs/leases.md.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/time_format.h"
#include "control/leases/lease_service.h"
#include "control/names.h"

namespace allot::control {

using model::AdminState;
using model::Lease;
using model::LeaseState;

namespace {

// `skipped` holds "host: why"; the host is the part before the colon.
bool wasSkipped(const Lease& l, const std::string& host) {
  return std::any_of(l.skipped.begin(), l.skipped.end(),
                     [&](const std::string& s) { return s.rfind(host + ":", 0) == 0; });
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

void LeaseService::claimHosts(Lease& l, Change<int>& c) {
  const std::string why = "lease " + std::to_string(l.id) + " starts";
  for (const auto& name : l.hosts) {
    if (wasSkipped(l, name) || contains(l.claimed, name)) continue;
    auto it = deps_.world.hosts.find(name);
    if (it == deps_.world.hosts.end()) {
      l.skipped.push_back(name + ": no longer known");
      continue;
    }
    const AdminState st = it->second.adminState;
    if (st == AdminState::kFailed || st == AdminState::kRetired) {
      // The lease goes on with the hosts it can have; the record says which it did not get.
      l.skipped.push_back(name + ": " + model::adminStateName(st));
      continue;
    }
    // Others' work is preempted at once: its owners had their notice (noticeLease).
    const std::string before = it->second.dedicatedTo;
    auto h = deps_.hosts.handOverHost(name, model::handoverTo(l.team, kSystemActor, why, l.id), 0);
    if (!h.ok()) {
      // Busy with another handover (a rolling upgrade's step, the previous lease's return):
      // tried again every tick until that one ends.
      spdlog::info("lease {}: host {} not claimed yet: {}", l.id, name, h.status().message());
      continue;
    }
    l.claimed.push_back(name);
    l.dedicatedBefore[name] = before;
    c.absorb(std::move(*h));
  }
}

void LeaseService::start(Lease& l, Change<int>& c) {
  claimHosts(l, c);
  l.state = LeaseState::kActive;
  l.startedAt = deps_.clock.nowMs();
  std::string msg = "lease " + std::to_string(l.id) + " started: hosts go to team " + l.team;
  if (!l.skipped.empty()) msg += " (skipped " + std::to_string(l.skipped.size()) + ")";
  recordEvent(l, msg, c.batch);
  spdlog::info("lease started: id={} team={} lag_ms={} skipped={}", l.id, l.team,
               l.startedAt - l.startAt, l.skipped.size());
}

void LeaseService::returnHosts(Lease& l, Change<int>& c) {
  const std::string why = "lease " + std::to_string(l.id) + " ended";
  for (const auto& name : l.hosts) {
    if (wasSkipped(l, name) || contains(l.returned, name)) continue;
    auto it = deps_.world.hosts.find(name);
    // Only what the lease still has goes back: a host it never got, or that has since gone
    // elsewhere (an admin's assign, the next lease), is not the lease's to return.
    const bool ours = it != deps_.world.hosts.end() && contains(l.claimed, name) &&
                      (it->second.handover ? it->second.handover->leaseId == l.id
                                           : it->second.dedicatedTo == l.team);
    if (!ours) {
      l.returned.push_back(name);
      continue;
    }
    // Back to where it was before the lease: the pool, or the team it was dedicated to.
    auto before = l.dedicatedBefore.find(name);
    const std::string to = before == l.dedicatedBefore.end() ? "" : before->second;
    auto h = deps_.hosts.handOverHost(name, model::handoverTo(to, kSystemActor, why, l.id), 0);
    if (h.ok()) {
      if (!to.empty())
        spdlog::info("lease {}: host {} goes back to team {}, as before the lease", l.id, name, to);
      l.returned.push_back(name);
      c.absorb(std::move(*h));
      continue;
    }
    const AdminState st = it->second.adminState;
    if (st == AdminState::kFailed || st == AdminState::kRetired) {
      // Nothing to hand back: an admin decides about a failed host (docs/leases.md).
      l.returned.push_back(name);
      spdlog::warn("lease {}: host {} is {}; not returned to the pool", l.id, name,
                   model::adminStateName(st));
    }
    // Otherwise its handover to the team is still running: tried again on the next tick.
  }
}

void LeaseService::notice(Lease& l, Change<int>& c) {
  for (const auto& name : l.hosts) {
    auto held = deps_.world.hostJobs().find(name);
    if (held == deps_.world.hostJobs().end()) continue;
    for (int64_t id : held->second) {
      if (std::find(l.noticed.begin(), l.noticed.end(), id) != l.noticed.end()) continue;
      const model::Job& j = deps_.world.job(id);
      const TimeMs from = j.startedAt ? j.startedAt : j.scheduledAt;
      // A job whose enforced end comes before the start leaves by itself.
      if (j.maxRuntimeMs > 0 && from + j.maxRuntimeMs + cancelGraceMs_ <= l.startAt) continue;
      l.noticed.push_back(id);
      // Another team's owners learn that the host is leased, not to whom (docs/leases.md).
      const std::string to = j.team == l.team ? "team " + l.team : "another team";
      deps_.events.appendForJob(
          model::EventKind::kLeasePreemptionNotice, j,
          "job " + std::to_string(id) + " will be preempted at " + formatIso8601(l.startAt) +
              ": host " + name + " is leased to " + to + " (lease " + std::to_string(l.id) + ")",
          {{"lease", l.id}, {"host", name}, {"start", formatIso8601(l.startAt)}}, c.batch);
      ++c.value;
    }
  }
}

Change<int> LeaseService::enforce() {
  Change<int> c;
  c.value = 0;
  const TimeMs now = deps_.clock.nowMs();
  for (auto& [id, l] : leases_) {
    const size_t before = c.batch.ops.size();
    const int noticesBefore = c.value;
    bool changed = false;
    if (l.state == LeaseState::kApproved && l.startAt <= now) {
      if (l.endAt <= now) {
        // allotd was down for the whole lease: there is nothing left to give, or to take back.
        l.state = LeaseState::kEnded;
        l.endedAt = now;
        recordEvent(l, "lease " + std::to_string(id) + " ended before allotd could start it",
                    c.batch);
      } else {
        start(l, c);
      }
      changed = true;
      ++c.value;
    } else if (l.state == LeaseState::kApproved && l.startAt - options_.noticeMs <= now) {
      notice(l, c);
      changed = c.value != noticesBefore;
    }
    if (l.state == LeaseState::kActive && l.endAt > now &&
        l.claimed.size() + l.skipped.size() < l.hosts.size()) {
      const size_t claimed = l.claimed.size();
      claimHosts(l, c);
      changed = changed || l.claimed.size() != claimed;
    }
    if (l.state == LeaseState::kActive && l.endAt <= now) {
      l.state = LeaseState::kEnded;
      l.endedAt = now;
      recordEvent(l, "lease " + std::to_string(id) + " ended: hosts return to the shared pool",
                  c.batch);
      spdlog::info("lease ended: id={} team={} lag_ms={}", id, l.team, now - l.endAt);
      changed = true;
      ++c.value;
    }
    if (l.state == LeaseState::kEnded) {
      const size_t returned = l.returned.size();
      returnHosts(l, c);
      changed = changed || l.returned.size() != returned;
    }
    if (changed || c.batch.ops.size() != before) c.batch.add(store::PutLease{l});
  }
  return c;
}

std::optional<Lease> LeaseService::onHost(const std::string& host) const {
  const Lease* next = nullptr;
  for (const auto& [id, l] : leases_) {
    if (!contains(l.hosts, host) || wasSkipped(l, host)) continue;
    if (l.state == LeaseState::kActive) return l;
    if (l.state == LeaseState::kApproved && (!next || l.startAt < next->startAt)) next = &l;
  }
  if (next) return *next;
  return std::nullopt;
}

}  // namespace allot::control
