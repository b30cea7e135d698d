#include "control/images/image_cache_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "common/log.h"
#include "common/version.h"
#include "control/authz.h"
#include "control/images/image_policy.h"
#include "model/image_ref.h"
#include "store/store.h"

namespace allot::control {

Result<const model::Host*> ImageCacheService::visible(const Principal& p,
                                                      const std::string& host) const {
  auto it = world_.hosts.find(host);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + host + "'", "host");
  return &it->second;
}

Status ImageCacheService::mayRun(const Principal& p, const model::Host& h) const {
  if (p.isAdmin()) return Status::Ok();
  if (h.dedicatedTo.empty())
    return Status::PermissionDenied("host " + h.name +
                                    " is in the shared pool, whose cache holds any team's "
                                    "images: only platform admins run it");
  return authz::canManageTeam(p, h.dedicatedTo);
}

HostImages ImageCacheService::view(const model::Host& h) const {
  HostImages out;
  out.host = h.name;
  if (auto r = reports_.find(h.name); r != reports_.end()) {
    out.report = r->second.report;
    out.reportedAt = r->second.at;
  }
  out.prunesAsked = h.imagePrunes;
  out.prepullsAsked = h.imagePrepulls;
  return out;
}

Result<HostImages> ImageCacheService::hostImages(const Principal& p,
                                                 const std::string& host) const {
  auto hOr = visible(p, host);
  if (!hOr.ok()) return hOr.status();
  const model::Host* h = *hOr;
  // Seeing is the team's, any role; running it, its team-admins' (mayRun).
  if (!p.isAdmin() && h->dedicatedTo.empty())
    return Status::PermissionDenied("host " + host +
                                    " is in the shared pool, whose cache holds any team's "
                                    "images: only platform admins see it");
  return view(*h);
}

Result<Change<HostImages>> ImageCacheService::prune(const Principal& p, const std::string& host) {
  auto foundOr = visible(p, host);
  if (!foundOr.ok()) return foundOr.status();
  const model::Host* found = *foundOr;
  ALLOT_RETURN_IF_ERROR(mayRun(p, *found));
  model::Host& h = world_.hosts.at(host);
  if (!h.images) return Status::FailedPrecondition("host " + host + " does not run jobs in images");
  ++h.imagePrunes;
  spdlog::info("image cache: prune {} asked of host {} by {}", h.imagePrunes, host, p.name);
  Change<HostImages> c;
  c.value = view(h);
  c.batch.add(store::PutHost{h});
  c.pushHosts.insert(host);
  return c;
}

std::string ImageCacheService::prepullTeam(const model::Host& h, const std::string& ref) {
  auto named = h.imagePrepullTeams.find(ref);
  const std::string team = named != h.imagePrepullTeams.end() ? named->second : h.dedicatedTo;
  return loginMayGoTo(h, team) ? team : "";
}

bool ImageCacheService::loginMayGoTo(const model::Host& h, const std::string& team) {
  return h.dedicatedTo.empty() || h.dedicatedTo == team;
}

Result<Change<std::vector<std::string>>> ImageCacheService::prepull(
    const Principal& p, const std::string& image, const std::vector<std::string>& hosts,
    const std::string& pool, const std::string& team) {
  auto ref = model::parseImageRef(image);
  if (!ref.ok()) return Status::InvalidArgument(ref.status().message(), "image");
  if (!team.empty()) {
    // The team's login goes with the pull as with its jobs' pulls: lent only by those who may
    // submit its work, for an image its jobs may run.
    auto t = world_.teams.find(team);
    if (t == world_.teams.end() || !authz::effectiveRole(p, team))
      return Status::NotFound("no team '" + team + "'", "team");
    ALLOT_RETURN_IF_ERROR(authz::canSubmitTo(p, team));  // a viewer: 403
    ALLOT_RETURN_IF_ERROR(checkImageAllowed(team, t->second.imageAllow, *ref));
  }
  if (hosts.empty() == pool.empty())
    return Status::InvalidArgument("name the hosts or a pool (\"shared\" or a team), not both",
                                   hosts.empty() ? "hosts" : "pool");
  std::vector<model::Host*> targets;
  if (!pool.empty()) {
    if (pool != "shared") {
      if (!world_.teams.count(pool) || !authz::effectiveRole(p, pool))
        return Status::NotFound("no pool '" + pool + "': a pool is \"shared\" or a team", "pool");
    }
    for (auto& [name, h] : world_.hosts) {
      const bool inPool = pool == "shared" ? h.dedicatedTo.empty() : h.dedicatedTo == pool;
      if (inPool && h.images && h.adminState != model::AdminState::kRetired) targets.push_back(&h);
    }
    if (targets.empty())
      return Status::FailedPrecondition("no host of pool '" + pool + "' runs jobs in images");
  } else {
    if (hosts.size() > 1000) return Status::InvalidArgument("at most 1000 hosts", "hosts");
    std::set<std::string> seen;
    for (const auto& name : hosts) {
      if (!seen.insert(name).second) continue;
      auto foundOr = visible(p, name);
      if (!foundOr.ok()) return foundOr.status();
      const model::Host* found = *foundOr;
      if (!found->images)
        return Status::FailedPrecondition("host " + name + " does not run jobs in images");
      targets.push_back(&world_.hosts.at(name));
    }
  }
  // Each host's team (or the admin) must be entitled to the image, as for a job's.
  for (const model::Host* h : targets) {
    ALLOT_RETURN_IF_ERROR(mayRun(p, *h));
    if (!team.empty() && !loginMayGoTo(*h, team))
      return Status::InvalidArgument("host " + h->name + " is dedicated to team " + h->dedicatedTo +
                                         ": team " + team +
                                         "'s registry login goes only to shared hosts and its own",
                                     "team");
    if (!p.isAdmin()) {
      auto team = world_.teams.find(h->dedicatedTo);
      ALLOT_RETURN_IF_ERROR(checkImageAllowed(
          h->dedicatedTo,
          team == world_.teams.end() ? std::vector<std::string>{} : team->second.imageAllow, *ref));
    }
    if (h->imagePrepulls.size() >= model::kMaxPrepulls &&
        std::find(h->imagePrepulls.begin(), h->imagePrepulls.end(), ref->str()) ==
            h->imagePrepulls.end())
      return Status::FailedPrecondition("host " + h->name + " already has " +
                                        std::to_string(model::kMaxPrepulls) +
                                        " prepulls under way; ask again once they are done");
  }
  Change<std::vector<std::string>> c;
  for (model::Host* h : targets) {
    c.value.push_back(h->name);
    const bool asked = std::find(h->imagePrepulls.begin(), h->imagePrepulls.end(), ref->str()) !=
                       h->imagePrepulls.end();
    auto named = h->imagePrepullTeams.find(ref->str());
    const std::string before = named == h->imagePrepullTeams.end() ? "" : named->second;
    if (asked && before == team) continue;
    if (!asked) h->imagePrepulls.push_back(ref->str());
    // Asked again with another team: the latest login is the one that pulls.
    if (team.empty())
      h->imagePrepullTeams.erase(ref->str());
    else
      h->imagePrepullTeams[ref->str()] = team;
    c.batch.add(store::PutHost{*h});
    c.pushHosts.insert(h->name);
  }
  spdlog::info("image cache: prepull of {} asked of {} host(s) by {}{}", ref->str(), c.value.size(),
               p.name, team.empty() ? "" : ", with team " + team + "'s login");
  return c;
}

Change<int> ImageCacheService::agentReport(const std::string& host, model::ImageReport report) {
  Change<int> c;
  c.value = 0;
  auto it = world_.hosts.find(host);
  if (it == world_.hosts.end()) return c;
  model::Host& h = it->second;
  std::set<std::string> done;
  for (const auto& i : report.images) done.insert(i.ref);
  for (const auto& pp : report.prepulls) {
    if (!pp.failed) continue;
    static ThrottledWarnings failures("");  // as many, and as long, as a host's report says
    failures.warn("image cache: prepull of {} on host {} failed: {}", pp.ref, host, pp.message);
    done.insert(pp.ref);
  }
  const size_t before = h.imagePrepulls.size();
  std::erase_if(h.imagePrepulls, [&](const std::string& r) { return done.count(r) > 0; });
  std::erase_if(h.imagePrepullTeams, [&](const auto& e) { return done.count(e.first) > 0; });
  if (h.imagePrepulls.size() != before) {
    c.batch.add(store::PutHost{h});
    c.pushHosts.insert(host);
  }
  // The index by image: what this host held before goes, what it holds now comes.
  if (auto old = reports_.find(host); old != reports_.end()) {
    for (const auto& i : old->second.report.images) {
      auto held = holders_.find(i.ref);
      if (held == holders_.end()) continue;
      held->second.erase(host);
      if (held->second.empty()) holders_.erase(held);
    }
  }
  for (const auto& i : report.images) holders_[i.ref][host] = i.minCuda;
  reports_[host] = {std::move(report), clock_.nowMs()};
  return c;
}

// A host's report counts while its agent is connected and the host is in service: what a host
// said before it went away (or was retired, or its credential revoked, which closes its stream)
// does not steer placements or submissions after it.
bool ImageCacheService::reportCounts(const std::string& host) const {
  auto it = world_.hosts.find(host);
  return it != world_.hosts.end() && it->second.state == model::HostState::kOnline &&
         it->second.adminState != model::AdminState::kRetired &&
         it->second.adminState != model::AdminState::kFailed;
}

std::vector<std::string> ImageCacheService::hostsHolding(const std::string& ref) const {
  std::vector<std::string> out;
  if (auto held = holders_.find(ref); held != holders_.end())
    for (const auto& [host, minCuda] : held->second)
      if (reportCounts(host)) out.push_back(host);
  return out;
}

std::string ImageCacheService::knownMinCuda(const std::string& ref, const std::string& team) const {
  // Only hosts the team's work may go to speak for it, and the lowest need among them wins: one
  // host's credential, reporting an image every team uses as needing CUDA 99.0, held every
  // team's jobs in it at submission (a review). With the lowest, a host that says more than the
  // others only keeps the job off itself: where the job lands on a host whose copy needs more (a
  // moved tag), its agent refuses to start it and the job is requeued with that host's minimum.
  std::optional<std::string> need;
  if (auto held = holders_.find(ref); held != holders_.end()) {
    for (const auto& [host, minCuda] : held->second) {
      // The hosts the team's work goes to are those its login may go to.
      if (!reportCounts(host) || !loginMayGoTo(world_.hosts.at(host), team)) continue;
      if (!need || versionAtLeast(*need, minCuda)) need = minCuda;
    }
  }
  return need.value_or("");
}

}  // namespace allot::control
