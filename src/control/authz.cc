#include "control/authz.h"

namespace allot::control::authz {

Status requireAdmin(const Principal& p, const char* what) {
  if (p.isAdmin()) return Status::Ok();
  return Status::PermissionDenied(std::string("only a platform admin may ") + what);
}

Principal auditReader() {
  Principal p;
  p.kind = Principal::Kind::kUser;
  p.name = "audit";
  p.role = model::Role::kPlatformAdmin;
  return p;
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
