#pragma once
// Authorization, in one place. Every path that reads or changes an object asks here.
// Rule of visibility: what a caller may not see does not exist for them (NotFound, never 403).
// The identity-and-access issue extends these functions; callers stay as they are.

#include "common/status.h"
#include "control/contours.h"
#include "control/principal.h"
#include "model/model.h"

namespace allot::control::authz {

// Platform settings: teams, users, join tokens.
Status requireAdmin(const Principal& p, const char* what);
// A team's objects (projects, jobs) are visible to its members and to platform admins.
bool canSeeTeam(const Principal& p, const std::string& team);
bool canSeeJob(const Principal& p, const model::Job& job);
// Cancelling: the job's own team (any member, as Slurm's scancel within an account allows for
// coordinators; per-user limits come with team-admin roles) and platform admins.
Status canCancelJob(const Principal& p, const model::Job& job);
// Submitting work into a team: its members, and admins on behalf of any team.
Status canSubmitTo(const Principal& p, const std::string& team);
// Submitting work of `team` into a contour: platform admins always; others need at least the
// contour's submit role in that team (PermissionDenied naming the contour and the role). Call
// after canSubmitTo, which decides whether the team exists for the caller at all.
Status canSubmitToContour(const Principal& p, const std::string& team, const ContourRule& contour);
// Running a team: its projects and the split of its quota among them. Platform admins and the
// team's team-admins; other members of the team are refused (403), other teams get NotFound.
Status canManageTeam(const Principal& p, const std::string& team);

// Dedicated capacity is "only us": a host dedicated to a team exists only for that team's users
// and platform admins; hosts in the shared pool are visible to every user.
bool canSeeHost(const Principal& p, const model::Host& host);
// A GPU dedicated to a team, on a pool host, is likewise invisible to other teams.
bool canSeeGpu(const Principal& p, const model::Gpu& gpu);
// The host as `p` may see it: GPUs dedicated to other teams left out (so absent from its lists
// and counts). Call only for a host canSeeHost allows.
model::Host visibleHost(const Principal& p, const model::Host& host);

}  // namespace allot::control::authz
