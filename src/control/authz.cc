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

bool canSeeHost(const Principal& p, const model::Host&) { return p.isUser(); }

}  // namespace allot::control::authz
