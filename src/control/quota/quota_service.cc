// Quotas: a team's guarantee and sharing settings (platform admins), and its split among the
// team's projects (team-admins). See quota_service.h and docs/api.md.

#include "control/quota/quota_service.h"

#include <spdlog/spdlog.h>

#include "control/authz.h"
#include "control/names.h"

namespace allot::control {
namespace {

constexpr int kMaxGuaranteedGpus = 100'000;
constexpr size_t kMaxGuaranteeEntries = 256;
constexpr double kMaxWeight = 1000;

// "4 A100 GPUs", "2 GPUs of any model".
std::string gpusOf(int n, const std::string& model) {
  return std::to_string(n) + (model.empty() ? " GPUs of any model" : " " + model + " GPUs");
}

// Checks a guarantee map and drops zero entries: a guarantee of 0 is no guarantee.
Status normalizeGuarantee(std::map<std::string, int>& g, const char* field) {
  if (g.size() > kMaxGuaranteeEntries)
    return Status::InvalidArgument(
        std::string(field) + ": at most " + std::to_string(kMaxGuaranteeEntries) + " models",
        field);
  for (auto it = g.begin(); it != g.end();) {
    const auto& [model, n] = *it;
    if (!model.empty()) {
      ALLOT_RETURN_IF_ERROR(validateGpuModel(model, field));
    }
    if (n < 0 || n > kMaxGuaranteedGpus) {
      return Status::InvalidArgument(
          std::string(field) + "." + (model.empty() ? std::string("any") : model) +
              ": must be between 0 and " + std::to_string(kMaxGuaranteedGpus) + ", got " +
              std::to_string(n),
          field);
    }
    it = n == 0 ? g.erase(it) : std::next(it);
  }
  return Status::Ok();
}

Status checkLimit(const std::optional<int>& v, const char* field) {
  if (v && (*v < -1 || *v > kMaxGuaranteedGpus))
    return Status::InvalidArgument(std::string(field) + ": must be between 0 and " +
                                       std::to_string(kMaxGuaranteedGpus) + ", or null for none",
                                   field);
  return Status::Ok();
}

int countOf(const std::map<std::string, int>& g, const std::string& model) {
  auto it = g.find(model);
  return it == g.end() ? 0 : it->second;
}

// What the team's projects split among them, key by key.
std::map<std::string, int> projectSplits(const World& w, const std::string& team,
                                         const std::string& except) {
  std::map<std::string, int> sum;
  for (const auto& [key, pr] : w.projects) {
    if (pr.team != team || pr.name == except) continue;
    for (const auto& [model, n] : pr.guaranteed) sum[model] += n;
  }
  return sum;
}

}  // namespace

Result<Change<model::Team>> QuotaService::setTeam(const Principal& p, const std::string& team,
                                                  const QuotaUpdate& u) {
  auto it = world_.teams.find(team);
  if (it == world_.teams.end() || !authz::canSeeTeam(p, team))
    return Status::NotFound("no team '" + team + "'");
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "set a team's quota"));

  model::Team t = it->second;
  if (u.guaranteed) {
    auto g = *u.guaranteed;
    ALLOT_RETURN_IF_ERROR(normalizeGuarantee(g, "guaranteed"));
    // The projects' split must stay within the guarantee; lowering it under their split would
    // leave promises the team cannot keep.
    for (const auto& [model, split] : projectSplits(world_, team, "")) {
      if (split > countOf(g, model)) {
        return Status::InvalidArgument("guaranteed: the projects of team '" + team + "' hold " +
                                           gpusOf(split, model) + " of its guarantee, more than " +
                                           std::to_string(countOf(g, model)) +
                                           "; lower their quotas first",
                                       "guaranteed");
      }
    }
    t.quota.guaranteed = std::move(g);
  }
  ALLOT_RETURN_IF_ERROR(checkLimit(u.borrowLimit, "borrow_limit"));
  ALLOT_RETURN_IF_ERROR(checkLimit(u.lendLimit, "lend_limit"));
  if (u.borrowLimit) t.quota.borrowLimit = *u.borrowLimit;
  if (u.lendLimit) t.quota.lendLimit = *u.lendLimit;
  if (u.weight) {
    // !(w > 0) also refuses NaN.
    if (!(*u.weight > 0) || *u.weight > kMaxWeight)
      return Status::InvalidArgument("weight: must be above 0 and at most 1000", "weight");
    t.quota.weight = *u.weight;
  }
  if (u.lendDedicated) t.lendDedicated = *u.lendDedicated;
  for (const auto& [contour, limit] : u.contourLimits) {
    // Removing a limit is allowed for any name, so that one left from a contour since dropped
    // from the config can be cleared.
    if (!limit) {
      t.quota.contourLimits.erase(contour);
      continue;
    }
    ALLOT_RETURN_IF_ERROR(contours_.check(contour, "contour_limits"));
    if (*limit < 0 || *limit > kMaxGuaranteedGpus)
      return Status::InvalidArgument("contour_limits." + contour + ": must be between 0 and " +
                                         std::to_string(kMaxGuaranteedGpus) + ", or null for none",
                                     "contour_limits");
    t.quota.contourLimits[contour] = *limit;
  }

  it->second = t;
  Change<model::Team> c;
  c.value = t;
  c.batch.add(store::PutTeam{t});
  spdlog::info("team quota set: team={} by={}", team, p.name);
  queueChanged_();
  return c;
}

Result<TeamQuotaView> QuotaService::ofTeam(const Principal& p, const std::string& team) const {
  auto it = world_.teams.find(team);
  if (it == world_.teams.end() || !authz::canSeeTeam(p, team))
    return Status::NotFound("no team '" + team + "'");
  TeamQuotaView v;
  v.team = it->second;
  for (const auto& [key, pr] : world_.projects) {
    if (pr.team == team && !pr.guaranteed.empty()) v.projects.push_back(pr);
  }
  auto st = world_.quotaStatus.find(team);
  if (st != world_.quotaStatus.end() && st->second.known) v.status = st->second;
  return v;
}

Result<Change<model::Project>> QuotaService::setProject(const Principal& p, const std::string& team,
                                                        const std::string& project,
                                                        std::map<std::string, int> guaranteed) {
  auto t = world_.teams.find(team);
  if (t == world_.teams.end() || !authz::canSeeTeam(p, team))
    return Status::NotFound("no team '" + team + "'");
  auto pr = world_.projects.find(World::projectKey(team, project));
  if (pr == world_.projects.end())
    return Status::NotFound("no project '" + project + "' in team '" + team + "'");
  ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, team));
  ALLOT_RETURN_IF_ERROR(normalizeGuarantee(guaranteed, "guaranteed"));

  auto others = projectSplits(world_, team, project);
  for (const auto& [model, n] : guaranteed) {
    int total = others[model] + n;
    int limit = countOf(t->second.quota.guaranteed, model);
    if (total > limit) {
      return Status::InvalidArgument(
          "guaranteed: the projects of team '" + team + "' would hold " + gpusOf(total, model) +
              ", more than the team's guarantee of " + std::to_string(limit),
          "guaranteed");
    }
  }
  pr->second.guaranteed = std::move(guaranteed);
  Change<model::Project> c;
  c.value = pr->second;
  c.batch.add(store::PutProject{pr->second});
  queueChanged_();
  return c;
}

}  // namespace allot::control
