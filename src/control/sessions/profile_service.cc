#include "control/sessions/profile_service.h"

#include "control/authz.h"
#include "control/profile.h"
#include "model/image_ref.h"

namespace allot::control {
namespace {

Status noProfile(const std::string& name) { return Status::NotFound("no profile '" + name + "'"); }

// Kept as references are written everywhere (a tag spelled out), so that what a session runs in
// reads the same in the profile, the job and the allow-list's messages.
void normalizeImage(model::Profile& p) {
  if (p.image.empty()) return;
  if (auto ref = model::parseImageRef(p.image); ref.ok()) p.image = ref->str();
}

}  // namespace

void ProfileService::load(const std::vector<model::Profile>& stored) {
  for (const auto& p : stored) profiles_[p.name] = p;
}

// The team must exist for the caller before anything else is said about it: another team's
// name answers NotFound, as everywhere.
static Status checkScope(const Principal& p, const std::string& team,
                         const std::map<std::string, model::Team>& teams) {
  if (!team.empty() && (!teams.count(team) || !authz::canSeeTeam(p, team)))
    return Status::NotFound("no team '" + team + "'", "team");
  return authz::canManageProfiles(p, team);
}

Result<Change<model::Profile>> ProfileService::create(const Principal& p, model::Profile profile) {
  ALLOT_RETURN_IF_ERROR(checkScope(p, profile.team, teams_));
  normalizeImage(profile);
  ALLOT_RETURN_IF_ERROR(validateProfile(profile, teams_));
  // Names are cluster-wide, so a taken name is said to be taken even when the caller cannot see
  // the profile: the price of one namespace, and all it tells is that the name is in use.
  if (profiles_.count(profile.name))
    return Status::AlreadyExists("profile '" + profile.name + "' already exists");
  profile.createdBy = p.name;
  profile.createdAt = clock_.nowMs();
  Change<model::Profile> c;
  c.value = profile;
  profiles_[profile.name] = profile;
  c.batch.add(store::PutProfile{std::move(profile)});
  return c;
}

Result<Change<model::Profile>> ProfileService::replace(const Principal& p, const std::string& name,
                                                       model::Profile profile) {
  auto it = profiles_.find(name);
  if (it == profiles_.end() || !authz::canSeeProfile(p, it->second)) return noProfile(name);
  // Rights over the profile as it is, and over where it goes when its team changes.
  ALLOT_RETURN_IF_ERROR(authz::canManageProfiles(p, it->second.team));
  ALLOT_RETURN_IF_ERROR(checkScope(p, profile.team, teams_));
  if (profile.name.empty()) profile.name = name;
  if (profile.name != name)
    return Status::InvalidArgument("name: a profile keeps its name ('" + name + "')", "name");
  normalizeImage(profile);
  ALLOT_RETURN_IF_ERROR(validateProfile(profile, teams_));
  profile.createdBy = it->second.createdBy;
  profile.createdAt = it->second.createdAt;
  Change<model::Profile> c;
  c.value = profile;
  it->second = profile;
  c.batch.add(store::PutProfile{std::move(profile)});
  return c;
}

Result<Change<model::Profile>> ProfileService::remove(const Principal& p, const std::string& name) {
  auto it = profiles_.find(name);
  if (it == profiles_.end() || !authz::canSeeProfile(p, it->second)) return noProfile(name);
  ALLOT_RETURN_IF_ERROR(authz::canManageProfiles(p, it->second.team));
  Change<model::Profile> c;
  c.value = it->second;
  profiles_.erase(it);
  c.batch.add(store::DeleteProfile{name});
  return c;
}

std::vector<model::Profile> ProfileService::list(const Principal& p) const {
  std::vector<model::Profile> out;
  for (const auto& [name, profile] : profiles_) {
    if (authz::canSeeProfile(p, profile)) out.push_back(profile);
  }
  return out;
}

Result<model::Profile> ProfileService::get(const Principal& p, const std::string& name) const {
  auto it = profiles_.find(name);
  if (it == profiles_.end() || !authz::canSeeProfile(p, it->second)) return noProfile(name);
  return it->second;
}

}  // namespace allot::control
