// Leases, as people ask for them: create, approve, reject, extend, end, and who sees what. The
// schedule side (starting and ending them, holds and notices) is in lease_schedule.cc.
// See docs/leases.md.

#include "control/leases/lease_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/time_format.h"
#include "control/authz.h"
#include "control/names.h"

namespace allot::control {

using model::Lease;
using model::LeaseState;

namespace {

// Approved and active leases hold their hosts; a request holds nothing until approved.
bool holdsHosts(const Lease& l) {
  return l.state == LeaseState::kApproved || l.state == LeaseState::kActive;
}

bool overlaps(TimeMs aStart, TimeMs aEnd, TimeMs bStart, TimeMs bEnd) {
  return aStart < bEnd && bStart < aEnd;
}

// Whether `p` may decide lease `id` now: only an admin decides, and only a lease still requested.
// `action` is what the refusal of a non-admin names, `decided` what only a request can be.
Status checkDecision(const Principal& p, const Lease& l, int64_t id, const char* action,
                     const char* decided) {
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, action));
  if (l.state != LeaseState::kRequested)
    return Status::FailedPrecondition("lease " + std::to_string(id) + " is " +
                                      model::leaseStateName(l.state) +
                                      "; only a requested lease can be " + decided);
  return Status::Ok();
}

// Records `p`'s decision on `l`: its new state, who decided, when and why.
void decide(Lease& l, LeaseState to, const Principal& p, TimeMs at, const std::string& reason) {
  l.state = to;
  l.decidedBy = p.name;
  l.decidedAt = at;
  l.decision = reason;
}

std::string window(TimeMs start, TimeMs end) {
  return "from " + formatIso8601(start) + " to " + formatIso8601(end);
}

// The other team that holds a GPU of host `h`, or "": a lease may not take such a host, whoever
// asks, since the handover clears GPU dedications and the lease would end them for good (an
// admin undedicates the GPU first, as for `host dedicate`).
std::string otherGpuHolder(const model::Host& h, const std::string& team) {
  for (const auto& g : h.gpus) {
    if (!g.dedicatedTo.empty() && g.dedicatedTo != team) return g.dedicatedTo;
  }
  return "";
}

// The other team that holds host `h` itself, or "". Only a platform admin leases such a host (it
// goes back to that team at the end, Lease::dedicatedBefore): seeing a host is not owning it, and
// a member of two teams sees both teams' hosts.
std::string otherHostHolder(const model::Host& h, const std::string& team) {
  return !h.dedicatedTo.empty() && h.dedicatedTo != team ? h.dedicatedTo : "";
}

// The host a lease is asked for should be usable then: it exists for `p`, is in service, holds no
// GPU of another team's, and is the shared pool's or `team`'s unless `p` is a platform admin. A
// holder `p` cannot see stays unnamed, as its GPUs are hidden from `p`.
Status checkLeasableHost(const Principal& p, const World& w, const std::string& name,
                         const std::string& team) {
  auto it = w.hosts.find(name);
  if (it == w.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'", "hosts");
  const model::Host& h = it->second;
  if (h.adminState == model::AdminState::kRetired)
    return Status::InvalidArgument("hosts: host " + name + " is retired", "hosts");
  auto holder = [&](const std::string& other) {
    return authz::canSeeTeam(p, other) ? "team '" + other + "'" : std::string("another team");
  };
  if (const std::string other = otherGpuHolder(h, team); !other.empty())
    return Status::InvalidArgument("hosts: a GPU of host " + name + " is dedicated to " +
                                       holder(other) + "; it is undedicated before a lease",
                                   "hosts");
  if (const std::string other = otherHostHolder(h, team); !other.empty() && !p.isAdmin())
    return Status::InvalidArgument("hosts: host " + name + " is dedicated to " + holder(other) +
                                       "; a lease takes hosts of the shared pool or of team '" +
                                       team + "'",
                                   "hosts");
  return Status::Ok();
}

}  // namespace

LeaseService::LeaseService(Deps deps, LeaseOptions options, int64_t cancelGraceMs)
    : deps_(std::move(deps)), options_(options), cancelGraceMs_(cancelGraceMs) {}

void LeaseService::load(const std::vector<Lease>& stored) {
  for (const auto& l : stored) {
    leases_[l.id] = l;
    nextId_ = std::max(nextId_, l.id + 1);
  }
}

Status LeaseService::conflict(const std::vector<std::string>& hosts, TimeMs start, TimeMs end,
                              int64_t except) const {
  for (const auto& [id, l] : leases_) {
    if (id == except || !holdsHosts(l) || !overlaps(start, end, l.startAt, l.endAt)) continue;
    for (const auto& h : hosts) {
      if (std::find(l.hosts.begin(), l.hosts.end(), h) == l.hosts.end()) continue;
      // The conflict is named by its lease and window, not its team: the asker may be another.
      return Status::FailedPrecondition("host " + h + " is leased " + window(l.startAt, l.endAt) +
                                        " (lease " + std::to_string(id) + ")");
    }
  }
  return Status::Ok();
}

// A count lease's hosts: in service (not failed or retired), of the shared pool or the team's
// own with no GPU another team holds, every GPU of the model asked and at least min_gpus of them,
// free of conflicting leases; the first `count` by name, so the choice is predictable.
Result<std::vector<std::string>> LeaseService::pickHosts(const Lease& l) const {
  std::vector<std::string> picked;
  std::string firstConflict;
  int matching = 0;
  for (const auto& [name, h] : deps_.world.hosts) {
    if (h.adminState == model::AdminState::kFailed || h.adminState == model::AdminState::kRetired)
      continue;
    if (!otherHostHolder(h, l.team).empty() || !otherGpuHolder(h, l.team).empty()) continue;
    if (static_cast<int>(h.gpus.size()) < std::max(1, l.minGpus)) continue;
    if (!l.gpuModel.empty() && std::any_of(h.gpus.begin(), h.gpus.end(), [&](const model::Gpu& g) {
          return g.model != l.gpuModel;
        }))
      continue;
    ++matching;
    Status taken = conflict({name}, l.startAt, l.endAt, l.id);
    if (!taken.ok()) {
      if (firstConflict.empty()) firstConflict = taken.message();
      continue;
    }
    picked.push_back(name);
    if (static_cast<int>(picked.size()) == l.count) return picked;
  }
  std::string what = std::to_string(l.count) + " host" + (l.count == 1 ? "" : "s") + " with " +
                     (l.minGpus > 0 ? "at least " + std::to_string(l.minGpus) + " " : "") +
                     (l.gpuModel.empty() ? "" : l.gpuModel + " ") + "GPUs";
  std::string msg = "cannot lease " + what + " " + window(l.startAt, l.endAt) + ": " +
                    std::to_string(matching) + " match and " + std::to_string(picked.size()) +
                    " of them are free";
  if (!firstConflict.empty()) msg += "; " + firstConflict;
  return Status::FailedPrecondition(msg);
}

void LeaseService::recordEvent(const Lease& l, std::string message, store::WriteBatch& batch) {
  model::Event e;
  e.kind = model::EventKind::kLeaseChanged;
  e.team = l.team;
  e.user = l.requestedBy;
  e.hosts = l.hosts;
  e.message = std::move(message);
  e.details = nlohmann::json{{"lease", l.id},
                             {"state", model::leaseStateName(l.state)},
                             {"start", formatIso8601(l.startAt)},
                             {"end", formatIso8601(l.endAt)}}
                  .dump();
  deps_.events.append(std::move(e), batch);
}

Result<Change<Lease>> LeaseService::create(const Principal& p, LeaseRequest r) {
  if (!deps_.world.teams.count(r.team) || !authz::canSeeTeam(p, r.team))
    return Status::NotFound("no team '" + r.team + "'", "team");
  ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, r.team));
  const bool named = !r.hosts.empty();
  if (named && r.count > 0)
    return Status::InvalidArgument("hosts: name hosts or give a count, not both", "hosts");
  if (!named && r.count <= 0)
    return Status::InvalidArgument("count: name hosts or give a count of at least 1", "count");
  if (r.count > 1000) return Status::InvalidArgument("count: at most 1000 hosts", "count");
  if (named && (!r.gpuModel.empty() || r.minGpus > 0))
    return Status::InvalidArgument("gpu_model: only with count (named hosts are what they are)",
                                   "gpu_model");
  if (r.minGpus < 0) return Status::InvalidArgument("min_gpus: must be >= 0", "min_gpus");
  if (!r.gpuModel.empty()) ALLOT_RETURN_IF_ERROR(validateGpuModel(r.gpuModel, "gpu_model"));
  const TimeMs now = deps_.clock.nowMs();
  // A minute of slack lets "now" typed a moment ago through; a start further back is a mistake.
  if (r.startAt < now - 60'000)
    return Status::InvalidArgument("start: " + formatIso8601(r.startAt) + " is in the past",
                                   "start");
  if (r.endAt <= r.startAt) return Status::InvalidArgument("end: must be after start", "end");
  std::vector<std::string> sorted = r.hosts;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return Status::InvalidArgument("hosts: a host is named twice", "hosts");
  for (const auto& h : r.hosts) ALLOT_RETURN_IF_ERROR(checkLeasableHost(p, deps_.world, h, r.team));

  Lease l;
  l.id = nextId_;
  l.team = r.team;
  l.requestedBy = p.name;
  l.reason = r.reason;
  l.hosts = r.hosts;
  l.count = r.count;
  l.gpuModel = r.gpuModel;
  l.minGpus = r.minGpus;
  l.startAt = r.startAt;
  l.endAt = r.endAt;
  l.createdAt = now;
  // Refused now rather than at approval when it cannot be granted as things stand.
  if (named) {
    ALLOT_RETURN_IF_ERROR(conflict(l.hosts, l.startAt, l.endAt, 0));
  } else {
    auto picked = pickHosts(l);
    if (!picked.ok()) return picked.status();
  }
  ++nextId_;
  Change<Lease> c;
  const LeaseOptions& o = options_;
  const int hosts = named ? static_cast<int>(l.hosts.size()) : l.count;
  const bool withinLimits = (o.maxHosts == 0 || hosts <= o.maxHosts) &&
                            (o.maxDurationMs == 0 || l.endAt - l.startAt <= o.maxDurationMs);
  recordEvent(l, "lease " + std::to_string(l.id) + " requested by " + p.name, c.batch);
  if (o.autoApprove && withinLimits) {
    if (!named) l.hosts = *pickHosts(l);
    l.state = LeaseState::kApproved;
    l.decidedBy = kSystemActor;
    l.decidedAt = now;
    l.decision = "auto-approved by policy";
    recordEvent(l, "lease " + std::to_string(l.id) + " approved by policy", c.batch);
    deps_.queueChanged();  // its hosts are held from now on
  }
  leases_[l.id] = l;
  c.batch.add(store::PutLease{l});
  spdlog::info("lease requested: id={} team={} by={} state={}", l.id, l.team, p.name,
               model::leaseStateName(l.state));
  c.value = l;
  return c;
}

std::vector<Lease> LeaseService::list(const Principal& p) const {
  std::vector<Lease> out;
  for (const auto& [id, l] : leases_) {
    if (authz::canSeeTeam(p, l.team)) out.push_back(l);
  }
  return out;
}

Result<Lease> LeaseService::get(const Principal& p, int64_t id) const {
  auto it = leases_.find(id);
  if (it == leases_.end() || !authz::canSeeTeam(p, it->second.team))
    return Status::NotFound("no lease " + std::to_string(id));
  return it->second;
}

Result<Change<Lease>> LeaseService::approve(const Principal& p, int64_t id,
                                            const std::string& reason) {
  auto seen = get(p, id);
  if (!seen.ok()) return seen.status();
  Lease& l = leases_.at(id);
  ALLOT_RETURN_IF_ERROR(checkDecision(p, l, id, "approve leases", "approved"));
  const TimeMs now = deps_.clock.nowMs();
  if (l.endAt <= now)
    return Status::FailedPrecondition("lease " + std::to_string(id) + " ended at " +
                                      formatIso8601(l.endAt) + " before it was approved");
  std::vector<std::string> hosts = l.hosts;
  if (l.count > 0) {
    auto picked = pickHosts(l);
    if (!picked.ok()) return picked.status();
    hosts = *picked;
  } else {
    ALLOT_RETURN_IF_ERROR(conflict(hosts, l.startAt, l.endAt, id));
    // Checked at the request too, but a GPU may have been dedicated since.
    for (const auto& name : hosts) {
      auto h = deps_.world.hosts.find(name);
      if (h == deps_.world.hosts.end()) continue;
      if (const std::string other = otherGpuHolder(h->second, l.team); !other.empty())
        return Status::FailedPrecondition("a GPU of host " + name + " is dedicated to team '" +
                                          other + "' now; it is undedicated before a lease");
    }
  }
  Change<Lease> c;
  l.hosts = hosts;
  decide(l, LeaseState::kApproved, p, now, reason);
  recordEvent(l, "lease " + std::to_string(id) + " approved by " + p.name, c.batch);
  c.batch.add(store::PutLease{l});
  deps_.queueChanged();
  spdlog::info("lease approved: id={} by={} hosts={}", id, p.name, hosts.size());
  c.value = l;
  return c;
}

Result<LeaseImpact> LeaseService::approvalImpact(const Principal& p, int64_t id) const {
  auto seen = get(p, id);
  if (!seen.ok()) return seen.status();
  const Lease& l = seen.value();
  ALLOT_RETURN_IF_ERROR(checkDecision(p, l, id, "approve leases", "approved"));
  LeaseImpact out;
  out.hosts = l.hosts;
  if (l.count > 0) {
    auto picked = pickHosts(l);
    if (!picked.ok()) return picked.status();
    out.hosts = *picked;
  }
  // The start hands the hosts over at once; what runs there then is preempted.
  out.stopsAt = std::max(l.startAt, deps_.clock.nowMs());
  out.stopped = workStoppedOn(deps_.world, out.hosts, out.stopsAt, cancelGraceMs_);
  return out;
}

Result<Change<Lease>> LeaseService::reject(const Principal& p, int64_t id,
                                           const std::string& reason) {
  auto seen = get(p, id);
  if (!seen.ok()) return seen.status();
  Lease& l = leases_.at(id);
  ALLOT_RETURN_IF_ERROR(checkDecision(p, l, id, "reject leases", "rejected"));
  Change<Lease> c;
  decide(l, LeaseState::kRejected, p, deps_.clock.nowMs(), reason);
  recordEvent(l,
              "lease " + std::to_string(id) + " rejected by " + p.name +
                  (reason.empty() ? "" : ": " + reason),
              c.batch);
  c.batch.add(store::PutLease{l});
  c.value = l;
  return c;
}

Result<Change<Lease>> LeaseService::extend(const Principal& p, int64_t id, TimeMs endAt) {
  auto seen = get(p, id);
  if (!seen.ok()) return seen.status();
  Lease& l = leases_.at(id);
  ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, l.team));
  const LeaseOptions& o = options_;
  // An extension of a granted lease is a grant too: a team-admin may extend only where the
  // policy would have approved the longer lease by itself.
  const bool policyAllows =
      o.autoApprove && (o.maxDurationMs == 0 || endAt - l.startAt <= o.maxDurationMs);
  if (!p.isAdmin() && l.state != LeaseState::kRequested && !policyAllows)
    return Status::PermissionDenied("only a platform admin may extend lease " + std::to_string(id) +
                                    " that far (the auto-approve policy does not cover it)");
  if (l.state != LeaseState::kRequested && l.state != LeaseState::kApproved &&
      l.state != LeaseState::kActive)
    return Status::FailedPrecondition("lease " + std::to_string(id) + " is " +
                                      model::leaseStateName(l.state) + "; it cannot be extended");
  if (endAt <= l.endAt)
    return Status::InvalidArgument("end: must be after the lease's end, " + formatIso8601(l.endAt),
                                   "end");
  if (l.state != LeaseState::kRequested)
    ALLOT_RETURN_IF_ERROR(conflict(l.hosts, l.startAt, endAt, id));
  Change<Lease> c;
  const TimeMs before = l.endAt;
  l.endAt = endAt;
  recordEvent(l,
              "lease " + std::to_string(id) + " extended by " + p.name + " from " +
                  formatIso8601(before) + " to " + formatIso8601(endAt),
              c.batch);
  c.batch.add(store::PutLease{l});
  c.value = l;
  return c;
}

Result<Change<Lease>> LeaseService::end(const Principal& p, int64_t id, const std::string& reason) {
  auto seen = get(p, id);
  if (!seen.ok()) return seen.status();
  Lease& l = leases_.at(id);
  ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, l.team));
  Change<Lease> c;
  const TimeMs now = deps_.clock.nowMs();
  switch (l.state) {
    case LeaseState::kRequested:
    case LeaseState::kApproved:
      l.state = LeaseState::kCancelled;
      break;
    case LeaseState::kActive:
      // Its hosts go back through the same path as at the scheduled end, on this call.
      l.endAt = std::min(l.endAt, now);
      break;
    default:
      return Status::FailedPrecondition("lease " + std::to_string(id) + " is already " +
                                        model::leaseStateName(l.state));
  }
  l.decidedBy = p.name;
  l.decidedAt = now;
  l.decision = reason;
  if (l.state == LeaseState::kActive) {
    Change<int> ended;
    l.state = LeaseState::kEnded;
    l.endedAt = now;
    returnHosts(l, ended);
    c.batch = std::move(ended.batch);
    c.pushHosts = std::move(ended.pushHosts);
  }
  recordEvent(l,
              "lease " + std::to_string(id) + " " + model::leaseStateName(l.state) + " by " +
                  p.name + (reason.empty() ? "" : ": " + reason),
              c.batch);
  c.batch.add(store::PutLease{l});
  deps_.queueChanged();
  c.value = l;
  return c;
}

}  // namespace allot::control
