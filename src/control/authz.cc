#include "control/authz.h"

namespace allot::control::authz {

Status requireAdmin(const Principal& p, const char* what) {
  if (p.isAdmin()) return Status::Ok();
  return Status::PermissionDenied(std::string("only a platform admin may ") + what);
}

bool canSeeTeam(const Principal& p, const std::string& team) {
  if (!p.isUser()) return false;
  return p.isAdmin() || (!p.team.empty() && p.team == team);
}

bool canSeeJob(const Principal& p, const model::Job& job) { return canSeeTeam(p, job.team); }

Status canCancelJob(const Principal& p, const model::Job& job) {
  if (canSeeJob(p, job)) return Status::Ok();
  return Status::NotFound("no job " + std::to_string(job.id));
}

Status canSubmitTo(const Principal& p, const std::string& team) {
  if (p.isAdmin()) return Status::Ok();
  if (p.isUser() && p.team == team) return Status::Ok();
  return Status::NotFound("no team '" + team + "'");
}

namespace {

// Roles in a team, weakest first: what one may do, every higher role may do too.
int roleRank(model::Role r) {
  switch (r) {
    case model::Role::kMember:
      return 1;
    case model::Role::kTeamAdmin:
      return 2;
    case model::Role::kPlatformAdmin:
      return 3;
  }
  return 0;
}

// The caller's role in `team`. One place, so that per-team roles change only this.
std::optional<model::Role> roleInTeam(const Principal& p, const std::string& team) {
  if (!p.isUser() || p.team.empty() || p.team != team) return std::nullopt;
  return p.role;
}

}  // namespace

Status canSubmitToContour(const Principal& p, const std::string& team, const ContourRule& contour) {
  if (p.isAdmin()) return Status::Ok();
  auto role = roleInTeam(p, team);
  if (role && roleRank(*role) >= roleRank(contour.submitRole)) return Status::Ok();
  return Status::PermissionDenied("submitting to contour '" + contour.name + "' needs role " +
                                  model::roleName(contour.submitRole) + " in team '" + team + "'");
}

Status canManageTeam(const Principal& p, const std::string& team) {
  if (!canSeeTeam(p, team)) return Status::NotFound("no team '" + team + "'");
  if (p.isAdmin() || p.role == model::Role::kTeamAdmin) return Status::Ok();
  return Status::PermissionDenied("only a team-admin of team '" + team +
                                  "' or a platform admin may do this");
}

namespace {

// Visible to `p` when reserved for nobody, for p's own team, or when p is a platform admin.
bool dedicationVisible(const Principal& p, const std::string& dedicatedTo) {
  if (!p.isUser()) return false;
  return dedicatedTo.empty() || p.isAdmin() || (!p.team.empty() && p.team == dedicatedTo);
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

}  // namespace allot::control::authz
