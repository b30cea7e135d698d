// Teams and projects: platform admins create teams, team-admins their team's projects; each is
// seen by those who may see its team.

#include "control/access/access_service.h"
#include "control/authz.h"
#include "control/images/image_policy.h"
#include "control/names.h"

namespace allot::control {

Result<Change<model::Team>> AccessService::createTeam(const Principal& p, const std::string& name) {
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "create teams"));
  ALLOT_RETURN_IF_ERROR(validateName(name, "name"));
  if (world_.teams.count(name)) return Status::AlreadyExists("team '" + name + "' already exists");
  Change<model::Team> c;
  c.value.name = name;
  c.value.createdAt = clock_.nowMs();
  ALLOT_RETURN_IF_ERROR(assignTeamGid(c.value, c.batch));
  world_.teams[name] = c.value;
  c.batch.add(store::PutTeam{c.value});
  return c;
}

std::vector<model::Team> AccessService::listTeams(const Principal& p) const {
  std::vector<model::Team> out;
  for (const auto& [name, t] : world_.teams) {
    if (authz::canSeeTeam(p, name)) out.push_back(t);
  }
  return out;
}

Result<model::Team> AccessService::team(const Principal& p, const std::string& name) const {
  auto it = world_.teams.find(name);
  if (it == world_.teams.end() || !authz::canSeeTeam(p, name))
    return Status::NotFound("no team '" + name + "'");
  return it->second;
}

Result<Change<model::Team>> AccessService::setImageAllow(const Principal& p,
                                                         const std::string& name,
                                                         std::vector<std::string> allow) {
  auto current = team(p, name);
  if (!current.ok()) return current.status();
  // What a team may pull decides what its hosts fetch and run: the platform's call, not the
  // team's (a team-admin could otherwise point hosts at any address).
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "set which images a team may use"));
  ALLOT_RETURN_IF_ERROR(validateImageAllow(allow));
  model::Team& t = world_.teams.at(name);
  t.imageAllow = std::move(allow);
  Change<model::Team> c;
  c.value = t;
  c.batch.add(store::PutTeam{t});
  return c;
}

Result<Change<model::Team>> AccessService::setDefaultImage(const Principal& p,
                                                           const std::string& name,
                                                           const std::string& image) {
  auto current = team(p, name);
  if (!current.ok()) return current.status();
  ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, name));
  model::Team& t = world_.teams.at(name);
  std::string chosen;
  if (!image.empty()) {
    auto ref = model::parseImageRef(image);
    if (!ref.ok()) return ref.status();  // names "image"
    ALLOT_RETURN_IF_ERROR(checkImageAllowed(name, t.imageAllow, *ref));
    chosen = ref->str();
  }
  t.defaultImage = chosen;
  Change<model::Team> c;
  c.value = t;
  c.batch.add(store::PutTeam{t});
  return c;
}

Result<Change<model::Project>> AccessService::createProject(const Principal& p,
                                                            const std::string& name,
                                                            const std::string& teamIn) {
  std::string team = teamIn.empty() ? p.soleTeam() : teamIn;
  if (team.empty()) return Status::InvalidArgument(teamRequired(p), "team");
  ALLOT_RETURN_IF_ERROR(validateName(name, "name"));
  if (!world_.teams.count(team) || !authz::canSeeTeam(p, team))
    return Status::NotFound("no team '" + team + "'");
  ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, team));
  auto key = World::projectKey(team, name);
  if (world_.projects.count(key))
    return Status::AlreadyExists("project '" + name + "' already exists in team '" + team + "'");
  Change<model::Project> c;
  c.value.name = name;
  c.value.team = team;
  c.value.createdAt = clock_.nowMs();
  world_.projects[key] = c.value;
  c.batch.add(store::PutProject{c.value});
  return c;
}

std::vector<model::Project> AccessService::listProjects(const Principal& p) const {
  std::vector<model::Project> out;
  for (const auto& [key, pr] : world_.projects) {
    if (authz::canSeeTeam(p, pr.team)) out.push_back(pr);
  }
  return out;
}

}  // namespace allot::control
