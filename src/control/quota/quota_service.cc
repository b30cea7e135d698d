// Quotas: a team's guarantee and sharing settings (platform admins), and its split among the
// team's projects (team-admins). See quota_service.h and docs/api.md.

#include "control/quota/quota_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

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

// The pool guarantees are promised against: every joined host's GPUs that no team has
// dedicated, whatever the host's state now (an offline or drained host comes back), retired
// hosts aside. The scheduling pass counts only what is schedulable at that moment and scales the
// guarantees down while hosts are away (docs/scheduler.md).
std::map<std::string, int> poolGpus(const World& w) {
  std::map<std::string, int> out;
  for (const auto& [name, h] : w.hosts) {
    if (!h.dedicatedTo.empty() || h.adminState == model::AdminState::kRetired) continue;
    for (const auto& g : h.gpus) {
      if (g.dedicatedTo.empty()) ++out[g.model];
    }
  }
  return out;
}

int sumOf(const std::map<std::string, int>& g) {
  int n = 0;
  for (const auto& [model, v] : g) n += v;
  return n;
}

// "12 GPUs (8 A100, 4 H100)".
std::string poolText(const std::map<std::string, int>& pool) {
  std::string models;
  for (const auto& [model, n] : pool) {
    if (!models.empty()) models += ", ";
    models += std::to_string(n) + " " + model;
  }
  return std::to_string(sumOf(pool)) + " GPUs (" + models + ")";
}

// Refuses a guarantee for `team` that, with every other team's, would promise more than the
// pool has, per model or in all: the pass would otherwise scale every team's guarantee down
// behind its back. Only a change that makes things worse is refused, so an admin can always
// lower a guarantee of a pool that shrank. A fleet with no host yet is being set up: guarantees
// may be set ahead of it.
Status checkWithinPool(const World& w, const std::string& team, const model::Team& before,
                       const std::map<std::string, int>& g) {
  const auto pool = poolGpus(w);
  if (pool.empty()) return Status::Ok();
  std::map<std::string, int> others;
  for (const auto& [name, t] : w.teams) {
    if (name == team) continue;
    for (const auto& [model, n] : t.quota.guaranteed) others[model] += n;
  }
  const std::string how =
      "; or pass overcommit: true (allot team quota set --overcommit) to promise it anyway, every "
      "team's guarantee then scaled down in proportion";
  for (const auto& [model, n] : g) {
    if (model.empty() || n <= countOf(before.quota.guaranteed, model)) continue;
    const int have = countOf(pool, model);
    if (countOf(others, model) + n > have) {
      return Status::InvalidArgument(
          "guaranteed." + model + ": the pool has " + std::to_string(have) + " " + model +
              " GPUs and other teams are guaranteed " + std::to_string(countOf(others, model)) +
              " of them; team '" + team + "' can be guaranteed at most " +
              std::to_string(std::max(0, have - countOf(others, model))) + how,
          "guaranteed");
    }
  }
  const int total = sumOf(g), poolTotal = sumOf(pool), othersTotal = sumOf(others);
  if (total > sumOf(before.quota.guaranteed) && othersTotal + total > poolTotal) {
    return Status::InvalidArgument(
        "guaranteed: the pool has " + poolText(pool) + " and other teams are guaranteed " +
            std::to_string(othersTotal) + "; team '" + team + "' can be guaranteed at most " +
            std::to_string(std::max(0, poolTotal - othersTotal)) + " in all, not " +
            std::to_string(total) + how,
        "guaranteed");
  }
  return Status::Ok();
}

// A project's split is counted key by key against the team's guarantee: a split "of any model"
// draws on the team's any-model guarantee only, a split of H100 on its H100 one. When the
// refused key is the wrong kind for the team's guarantee, say which form fits.
std::string splitHint(const std::map<std::string, int>& team, const std::string& refusedKey,
                      int asked) {
  if (refusedKey.empty()) {
    for (const auto& [model, n] : team) {
      if (!model.empty())
        return "; the team's guarantee is by model: split that instead, e.g. allot project quota "
               "set PROJECT --gpus " +
               model + "=" + std::to_string(std::min(asked, n));
    }
    return "";
  }
  if (int any = countOf(team, ""); any > 0)
    return "; the team's guarantee is of any model: split that instead, e.g. allot project quota "
           "set PROJECT --any " +
           std::to_string(std::min(asked, any));
  return "";
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
    if (!u.overcommit) ALLOT_RETURN_IF_ERROR(checkWithinPool(world_, team, t, g));
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
  spdlog::info("team quota set: team={} by={}{}", team, p.name,
               u.overcommit ? " (overcommit: guarantees may exceed the pool)" : "");
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
              ", more than the team's guarantee of " + std::to_string(limit) +
              splitHint(t->second.quota.guaranteed, model, n),
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
