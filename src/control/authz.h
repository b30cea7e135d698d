#pragma once
// Authorization, in one place. Every path that reads or changes an object asks here.
// Rule of visibility: what a caller may not see does not exist for them (NotFound, never 403).
// A caller who may see an object but not do something to it (a viewer submitting, a member
// cancelling a teammate's job) gets PermissionDenied (403), which leaks nothing new.
//
// Roles (model::Role): a viewer reads its team's work; a member also submits and cancels its
// own; a team-admin also runs the team; a platform admin may do everything.

#include <string>

#include "common/status.h"
#include "control/contours.h"
#include "control/principal.h"
#include "model/model.h"

namespace allot::control::authz {

// Platform settings: teams, users, pools, join tokens, hosts.
Status requireAdmin(const Principal& p, const char* what);
// The principal that the audit log reads resources as (api/audit_capture.h): a platform admin,
// so that an entry's before and after show the whole object, whoever made the change.
Principal auditReader();

// A team's objects (projects, jobs) are visible to its members (any role) and platform admins.
bool canSeeTeam(const Principal& p, const std::string& team);
bool canSeeJob(const Principal& p, const model::Job& job);
// Cancelling (and other changes to one job): its submitter, the team's team-admins, platform
// admins. Other members and viewers of the team get PermissionDenied; other teams NotFound.
Status canCancelJob(const Principal& p, const model::Job& job);
// Submitting work into a team: its members and team-admins, and platform admins on behalf of any
// team. Viewers get PermissionDenied; other teams NotFound.
Status canSubmitTo(const Principal& p, const std::string& team);
// Submitting work of `team` into a contour: platform admins always; others need at least the
// contour's submit role in that team (PermissionDenied naming the contour and the role). Call
// after canSubmitTo, which decides whether the team exists for the caller at all.
Status canSubmitToContour(const Principal& p, const std::string& team, const ContourRule& contour);
// Running a team: its members' roles, projects, the split of its quota, lease requests, idle
// policies. Platform admins and the team's team-admins; other members and viewers get
// PermissionDenied, other teams NotFound.
Status canManageTeam(const Principal& p, const std::string& team);
// The least role `p` holds among a team's: nullopt when `p` is not in it. Platform admins count
// as team-admins of every team.
std::optional<model::Role> effectiveRole(const Principal& p, const std::string& team);

// A user's account: the user themselves and platform admins see it, and so does anyone who shares
// a team with them (team-mates appear in the team's member list). Service accounts are also
// managed (tokens) by the team-admins of their teams.
bool canSeeUser(const Principal& p, const model::User& u);
Status canManageServiceAccount(const Principal& p, const model::User& u);

// Dedicated capacity is "only us": a host dedicated to a team exists only for that team's users
// and platform admins; hosts in the shared pool are visible to every user.
bool canSeeHost(const Principal& p, const model::Host& host);
// A GPU dedicated to a team, on a pool host, is likewise invisible to other teams.
bool canSeeGpu(const Principal& p, const model::Gpu& gpu);
// The host as `p` may see it: GPUs dedicated to other teams left out (so absent from its lists
// and counts). Call only for a host canSeeHost allows.
model::Host visibleHost(const Principal& p, const model::Host& host);
// What a host's task printed (a lease's profile, the wipe's account of what it killed) may be any
// team's: platform admins only.
bool canSeeTaskOutput(const Principal& p);

// Session profiles (docs/sessions.md). A team's profile is seen by its team; a platform-wide one
// by the teams in its visible_to (every user when that is empty); platform admins see all.
bool canSeeProfile(const Principal& p, const model::Profile& profile);
// Defining profiles of `team` ("" = platform-wide): platform admins for platform-wide ones, the
// team's team-admins (and platform admins) for a team's. Another team is NotFound.
Status canManageProfiles(const Principal& p, const std::string& team);

}  // namespace allot::control::authz
