#include "control/authz.h"

namespace allot::control::authz {

using model::Role;

Status requireAdmin(const Principal& p, const char* what) {
  if (p.isAdmin()) return Status::Ok();
  return Status::PermissionDenied(std::string("only a platform admin may ") + what);
}

bool canSeeTaskOutput(const Principal& p) { return p.isAdmin(); }

Principal auditReader() {
  Principal p;
  p.kind = Principal::Kind::kUser;
  p.name = "audit";
  p.platformAdmin = true;
  return p;
}

bool canSeeTeam(const Principal& p, const std::string& team) {
  return p.isAdmin() || p.inTeam(team);
}

std::optional<Role> effectiveRole(const Principal& p, const std::string& team) {
  if (p.isAdmin()) return Role::kPlatformAdmin;
  return p.roleIn(team);
}

bool canSeeJob(const Principal& p, const model::Job& job) { return canSeeTeam(p, job.team); }

Status canCancelJob(const Principal& p, const model::Job& job) {
  auto role = effectiveRole(p, job.team);
  if (!role) return Status::NotFound("no job " + std::to_string(job.id));
  if (*role >= Role::kTeamAdmin) return Status::Ok();
  if (*role == Role::kMember && job.user == p.name) return Status::Ok();
  return Status::PermissionDenied("job " + std::to_string(job.id) + " belongs to " + job.user +
                                  ": only its submitter or a team-admin of team '" + job.team +
                                  "' may change it");
}

Status canSubmitTo(const Principal& p, const std::string& team) {
  auto role = effectiveRole(p, team);
  if (!role) return Status::NotFound("no team '" + team + "'");
  if (*role == Role::kViewer)
    return Status::PermissionDenied("viewers of team '" + team + "' may not submit work");
  return Status::Ok();
}

// Roles compare weakest first (model::Role): what one may do, every higher role may do too.
Status canSubmitToContour(const Principal& p, const std::string& team, const ContourRule& contour) {
  if (p.isAdmin()) return Status::Ok();
  auto role = p.roleIn(team);
  if (role && *role >= contour.submitRole) return Status::Ok();
  return Status::PermissionDenied("submitting to contour '" + contour.name + "' needs role " +
                                  model::roleName(contour.submitRole) + " in team '" + team + "'");
}

Status canManageTeam(const Principal& p, const std::string& team) {
  auto role = effectiveRole(p, team);
  if (!role) return Status::NotFound("no team '" + team + "'");
  if (*role >= Role::kTeamAdmin) return Status::Ok();
  return Status::PermissionDenied("only a team-admin of team '" + team +
                                  "' or a platform admin may do this");
}

bool canSeeUser(const Principal& p, const model::User& u) {
  if (!p.isUser()) return false;
  if (p.isAdmin() || u.name == p.name) return true;
  for (const auto& [team, role] : u.teams) {
    if (p.inTeam(team)) return true;
  }
  return false;
}

Status canManageServiceAccount(const Principal& p, const model::User& u) {
  if (!canSeeUser(p, u)) return Status::NotFound("no user '" + u.name + "'");
  if (p.isAdmin()) return Status::Ok();
  // Team-admin of every team the account is in, not of any one: an account in teams A and B
  // acts for B as well, so A's team-admin must not hold its tokens (docs/access.md). Nor of a
  // platform admin's account in their team: its token would make them platform admin.
  bool all = u.kind == model::UserKind::kService && !u.teams.empty() && !u.platformAdmin;
  for (const auto& [team, role] : u.teams) all = all && p.roleIn(team) == Role::kTeamAdmin;
  if (all) return Status::Ok();
  return Status::PermissionDenied(
      "only a platform admin, or a team-admin of every team of a service account, may manage "
      "user '" +
      u.name + "'");
}

namespace {

// Visible to `p` when reserved for nobody, for one of p's teams, or when p is a platform admin.
bool dedicationVisible(const Principal& p, const std::string& dedicatedTo) {
  if (!p.isUser()) return false;
  return dedicatedTo.empty() || p.isAdmin() || p.inTeam(dedicatedTo);
}

}  // namespace

bool canSeeHost(const Principal& p, const model::Host& host) {
  return dedicationVisible(p, host.dedicatedTo);
}

bool canSeeGpu(const Principal& p, const model::Gpu& gpu) {
  return dedicationVisible(p, gpu.dedicatedTo);
}

model::Host visibleHost(const Principal& p, const model::Host& host) {
  model::Host out = host;
  std::erase_if(out.gpus, [&](const model::Gpu& g) { return !canSeeGpu(p, g); });
  return out;
}

bool canSeeProfile(const Principal& p, const model::Profile& profile) {
  if (!p.isUser()) return false;
  if (p.isAdmin()) return true;
  if (!profile.team.empty()) return p.inTeam(profile.team);
  if (profile.visibleTo.empty()) return true;
  for (const auto& team : profile.visibleTo) {
    if (p.inTeam(team)) return true;
  }
  return false;
}

Status canManageProfiles(const Principal& p, const std::string& team) {
  if (team.empty()) return requireAdmin(p, "define platform-wide profiles");
  return canManageTeam(p, team);
}

}  // namespace allot::control::authz
