// Session profiles as people define them: create, replace, delete, and who sees which
// (docs/sessions.md). The rules a profile keeps are in profile.cc; who may do what in authz.cc.

#include "control/authz.h"
#include "control/cluster.h"
#include "control/profile.h"

namespace allot::control {
namespace {

Status noProfile(const std::string& name) { return Status::NotFound("no profile '" + name + "'"); }

}  // namespace

// The team must exist for the caller before anything else is said about it: another team's
// name answers NotFound, as everywhere.
static Status checkScope(const Principal& p, const std::string& team,
                         const std::map<std::string, model::Team>& teams) {
  if (!team.empty() && (!teams.count(team) || !authz::canSeeTeam(p, team)))
    return Status::NotFound("no team '" + team + "'", "team");
  return authz::canManageProfiles(p, team);
}

Result<Change<model::Profile>> Cluster::createProfile(const Principal& p, model::Profile profile) {
  ALLOT_RETURN_IF_ERROR(checkScope(p, profile.team, world_.teams));
  ALLOT_RETURN_IF_ERROR(validateProfile(profile, world_.teams));
  // Names are cluster-wide, so a taken name is said to be taken even when the caller cannot see
  // the profile: the price of one namespace, and all it tells is that the name is in use.
  if (world_.profiles.count(profile.name))
    return Status::AlreadyExists("profile '" + profile.name + "' already exists");
  profile.createdBy = p.name;
  profile.createdAt = clock_.nowMs();
  Change<model::Profile> c;
  c.value = profile;
  world_.profiles[profile.name] = profile;
  c.batch.add(store::PutProfile{std::move(profile)});
  return c;
}

Result<Change<model::Profile>> Cluster::replaceProfile(const Principal& p, const std::string& name,
                                                       model::Profile profile) {
  auto it = world_.profiles.find(name);
  if (it == world_.profiles.end() || !authz::canSeeProfile(p, it->second)) return noProfile(name);
  // Rights over the profile as it is, and over where it goes when its team changes.
  ALLOT_RETURN_IF_ERROR(authz::canManageProfiles(p, it->second.team));
  ALLOT_RETURN_IF_ERROR(checkScope(p, profile.team, world_.teams));
  if (profile.name.empty()) profile.name = name;
  if (profile.name != name)
    return Status::InvalidArgument("name: a profile keeps its name ('" + name + "')", "name");
  ALLOT_RETURN_IF_ERROR(validateProfile(profile, world_.teams));
  profile.createdBy = it->second.createdBy;
  profile.createdAt = it->second.createdAt;
  Change<model::Profile> c;
  c.value = profile;
  it->second = profile;
  c.batch.add(store::PutProfile{std::move(profile)});
  return c;
}

Result<Change<model::Profile>> Cluster::deleteProfile(const Principal& p, const std::string& name) {
  auto it = world_.profiles.find(name);
  if (it == world_.profiles.end() || !authz::canSeeProfile(p, it->second)) return noProfile(name);
  ALLOT_RETURN_IF_ERROR(authz::canManageProfiles(p, it->second.team));
  Change<model::Profile> c;
  c.value = it->second;
  world_.profiles.erase(it);
  c.batch.add(store::DeleteProfile{name});
  return c;
}

std::vector<model::Profile> Cluster::listProfiles(const Principal& p) const {
  std::vector<model::Profile> out;
  for (const auto& [name, profile] : world_.profiles) {
    if (authz::canSeeProfile(p, profile)) out.push_back(profile);
  }
  return out;
}

Result<model::Profile> Cluster::getProfile(const Principal& p, const std::string& name) const {
  auto it = world_.profiles.find(name);
  if (it == world_.profiles.end() || !authz::canSeeProfile(p, it->second)) return noProfile(name);
  return it->second;
}

}  // namespace allot::control
