// Accounts, team membership and API tokens: who may call, as whom, with which roles
// (docs/access.md). Passwords and directory logins build on these (login.cc, ldap).

#include <algorithm>

#include "common/secrets.h"
#include "control/access/access_service.h"
#include "control/authz.h"
#include "control/names.h"

namespace allot::control {
namespace {

// A user keeps at most this many API tokens; sessions and host credentials do not count.
constexpr size_t kMaxTokensPerUser = 100;
// The longest a token may be valid for: ten years.
constexpr int64_t kMaxTokenTtlMs = 10LL * 365 * 24 * 3600 * 1000;

bool isLastPlatformAdmin(const World& w, const std::string& name) {
  for (const auto& [n, u] : w.users) {
    if (n != name && u.platformAdmin && !u.disabled) return false;
  }
  return true;
}

}  // namespace

CreatedToken AccessService::mintToken(model::ApiToken tok, const char* idKind,
                                      store::WriteBatch& batch) {
  tok.id = world_.newSecretId(idKind);
  CreatedToken out;
  out.secret = newToken(tok.id);
  tok.hash = hashToken(out.secret);
  world_.tokens[tok.id] = tok;
  batch.add(store::PutToken{tok});
  out.token = std::move(tok);
  return out;
}

bool AccessService::hostCredentialLive(const std::string& tokenId, const std::string& host) const {
  auto it = world_.tokens.find(tokenId);
  return it != world_.tokens.end() && it->second.owner == "host:" + host &&
         (it->second.expiresAt == 0 || it->second.expiresAt > clock_.nowMs());
}

std::optional<Change<std::string>> AccessService::bootstrapAdmin() {
  if (!world_.users.empty()) return std::nullopt;
  Change<std::string> c;
  model::User admin;
  admin.name = "admin";
  admin.platformAdmin = true;
  admin.createdAt = clock_.nowMs();
  admin.createdBy = kSystemActor;
  (void)assignUnixIds(admin, c.batch);  // a fresh store: the range is empty
  world_.users[admin.name] = admin;
  c.batch.add(store::PutUser{admin});
  c.value = mintToken({"", admin.name, "", clock_.nowMs(), 0, "bootstrap"}, "tok", c.batch).secret;
  return c;
}

std::optional<Principal> AccessService::authenticate(std::string_view bearer) const {
  // Tokens are "<id>_<secret>"; the id finds the row, the hash comparison is constant-time.
  auto sep = bearer.find('_');
  if (sep == std::string_view::npos) return std::nullopt;
  auto it = world_.tokens.find(std::string(bearer.substr(0, sep)));
  if (it == world_.tokens.end()) return std::nullopt;
  const auto& tok = it->second;
  if (!hashesEqual(tok.hash, hashToken(bearer))) return std::nullopt;
  if (tok.expiresAt != 0 && tok.expiresAt <= clock_.nowMs()) return std::nullopt;
  if (tok.owner.rfind("host:", 0) == 0) {
    Principal p;
    p.kind = Principal::Kind::kHost;
    p.name = tok.owner.substr(5);
    if (!world_.hosts.count(p.name)) return std::nullopt;
    return p;
  }
  auto u = world_.users.find(tok.owner);
  if (u == world_.users.end() || u->second.disabled) return std::nullopt;
  return Principal::ofUser(u->second);
}

Status AccessService::checkNewUser(const Principal& p, const NewUser& n) const {
  if (!p.isUser()) return Status::PermissionDenied("hosts cannot create users");
  ALLOT_RETURN_IF_ERROR(validateName(n.name, "name"));
  for (const auto& [team, role] : n.teams) {
    if (!world_.teams.count(team) || !authz::canSeeTeam(p, team))
      return Status::NotFound("no team '" + team + "'");
    if (!model::isTeamRole(role))
      return Status::InvalidArgument(
          "teams: a team role is viewer, member or team-admin; platform admin is a flag of the "
          "user",
          "teams");
  }
  if (!p.isAdmin()) {
    // Team-admins make service accounts for their own teams' automation, and, where the platform
    // lets them ([access] team_admins_create_users), accounts for the people who join them.
    if (n.platformAdmin)
      return Status::PermissionDenied("only a platform admin may create a platform admin");
    if (n.kind != model::UserKind::kService && !teamAdminsCreateUsers_)
      return Status::PermissionDenied(
          "only a platform admin may create user accounts (a platform admin can let team-admins "
          "create them: [access] team_admins_create_users = true)");
    if (n.teams.empty()) return Status::PermissionDenied("only a platform admin may do that");
    // The Unix identity a workload runs as is the platform's to hand out: a chosen uid could be
    // anyone's on the hosts.
    if (n.uid >= 0 || n.gid >= 0)
      return Status::PermissionDenied("only a platform admin may set a user's uid and gid");
    for (const auto& [team, role] : n.teams) ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, team));
  }
  // Accounts are made for a team's work; only platform admins stand outside every team.
  if (n.teams.empty() && !n.platformAdmin)
    return Status::InvalidArgument("team: a user who is not a platform admin needs a team", "team");
  if (n.kind == model::UserKind::kService && !n.passwordHash.empty())
    return Status::InvalidArgument("password: service accounts log in with tokens only",
                                   "password");
  if (world_.users.count(n.name))
    return Status::AlreadyExists("user '" + n.name + "' already exists");
  if (n.uid >= 0 || n.gid >= 0) {
    if (n.uid < 0 || n.gid < 0)
      return Status::InvalidArgument("uid: a directory user needs both uid and gid", "uid");
    ALLOT_RETURN_IF_ERROR(checkDirectoryIds(n.name, n.uid, n.gid));
  }
  return Status::Ok();
}

Result<Change<CreatedUser>> AccessService::createUser(const Principal& p, NewUser n) {
  ALLOT_RETURN_IF_ERROR(checkNewUser(p, n));
  Change<CreatedUser> c;
  model::User& u = c.value.user;
  u.name = n.name;
  u.teams = std::move(n.teams);
  u.platformAdmin = n.platformAdmin;
  u.kind = n.kind;
  u.passwordHash = std::move(n.passwordHash);
  u.createdAt = clock_.nowMs();
  u.createdBy = p.name;
  u.uid = n.uid;
  u.gid = n.gid;
  ALLOT_RETURN_IF_ERROR(assignUnixIds(u, c.batch));
  world_.users[u.name] = u;
  c.batch.add(store::PutUser{u});
  c.value.token = mintToken({"", u.name, "", clock_.nowMs(), 0, "initial"}, "tok", c.batch).secret;
  return c;
}

Result<Change<CreatedUser>> AccessService::createUser(const Principal& p, const std::string& name,
                                                      const std::string& team, model::Role role) {
  if (role != model::Role::kPlatformAdmin && team.empty())
    return Status::InvalidArgument(
        std::string("team: a ") + model::roleName(role) + " must belong to a team", "team");
  NewUser n;
  n.name = name;
  n.platformAdmin = role == model::Role::kPlatformAdmin;
  if (!team.empty()) n.teams[team] = n.platformAdmin ? model::Role::kTeamAdmin : role;
  return createUser(p, std::move(n));
}

model::User AccessService::seenBy(const Principal& p, const model::User& u) const {
  if (p.isAdmin() || u.name == p.name) return u;
  // A colleague who is also in a team `p` is not in: that team stays unnamed (docs/access.md),
  // and so does an account's creator whom `p` could not look up.
  model::User out = u;
  std::erase_if(out.teams, [&](const auto& team) { return !p.inTeam(team.first); });
  auto creator = world_.users.find(out.createdBy);
  if (creator != world_.users.end() && !authz::canSeeUser(p, creator->second))
    out.createdBy.clear();
  return out;
}

std::vector<model::User> AccessService::listUsers(const Principal& p) const {
  std::vector<model::User> out;
  for (const auto& [name, u] : world_.users) {
    if (authz::canSeeUser(p, u)) out.push_back(seenBy(p, u));
  }
  return out;
}

Result<model::User> AccessService::getUser(const Principal& p, const std::string& name) const {
  auto it = world_.users.find(name);
  if (it == world_.users.end() || !authz::canSeeUser(p, it->second))
    return Status::NotFound("no user '" + name + "'");
  return seenBy(p, it->second);
}

Result<Change<model::User>> AccessService::updateUser(const Principal& p, const std::string& name,
                                                      const UserUpdate& up) {
  auto it = world_.users.find(name);
  if (it == world_.users.end() || !authz::canSeeUser(p, it->second))
    return Status::NotFound("no user '" + name + "'");
  model::User u = it->second;
  // People change their own password; everything else is a platform admin's.
  const bool ownPasswordOnly = name == p.name && !up.platformAdmin && !up.disabled;
  if (!ownPasswordOnly) ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "change other accounts"));
  if (up.passwordHash) {
    if (u.kind == model::UserKind::kService)
      return Status::InvalidArgument("password: service accounts log in with tokens only",
                                     "password");
    if (u.source == model::UserSource::kLdap)
      return Status::FailedPrecondition("user '" + name +
                                        "' comes from the directory: change the password there");
    u.passwordHash = *up.passwordHash;
  }
  const bool losesAdmin = (up.platformAdmin == false) || (up.disabled == true);
  if (u.platformAdmin && losesAdmin && isLastPlatformAdmin(world_, name))
    return Status::FailedPrecondition("user '" + name +
                                      "' is the last platform admin; make another one first");
  const bool becomesAdmin = up.platformAdmin && *up.platformAdmin && !u.platformAdmin;
  if (up.platformAdmin) u.platformAdmin = *up.platformAdmin;
  if (up.disabled) u.disabled = *up.disabled;
  Change<model::User> c;
  c.value = u;
  world_.users[name] = u;
  c.batch.add(store::PutUser{u});
  if (becomesAdmin || up.passwordHash) revokeTokensGivenByOthers(u, c.batch);
  if (up.passwordHash) {
    // What a password login minted (console sessions, `allot login` tokens) ends with the
    // password; named API tokens and service tokens are not the password's and stay.
    for (auto it = world_.tokens.begin(); it != world_.tokens.end();) {
      const model::ApiToken& t = it->second;
      const bool byPassword = t.kind == model::TokenKind::kSession ||
                              (t.kind == model::TokenKind::kApi && t.name == "login");
      if (t.owner == name && byPassword && t.id != up.keepTokenId) {
        c.batch.add(store::DeleteToken{t.id});
        it = world_.tokens.erase(it);
      } else {
        ++it;
      }
    }
  }
  return c;
}

void AccessService::revokeTokensGivenByOthers(const model::User& u, store::WriteBatch& batch) {
  const bool service = u.kind == model::UserKind::kService;
  // A person's initial token went to whoever created the account; a platform admin could grant
  // anything anyway, so only a team-admin's copy needs to end.
  auto creator = world_.users.find(u.createdBy);
  const bool madeByTeamAdmin = creator != world_.users.end() && !creator->second.platformAdmin;
  if (!service && !madeByTeamAdmin) return;
  for (auto it = world_.tokens.begin(); it != world_.tokens.end();) {
    const model::ApiToken& t = it->second;
    const bool given =
        t.owner == u.name && t.kind == model::TokenKind::kApi && (service || t.name == "initial");
    if (given) {
      batch.add(store::DeleteToken{t.id});
      it = world_.tokens.erase(it);
    } else {
      ++it;
    }
  }
}

Result<Change<model::User>> AccessService::setMembership(const Principal& p,
                                                         const std::string& team,
                                                         const std::string& user,
                                                         std::optional<model::Role> role) {
  if (!world_.teams.count(team) || !authz::canSeeTeam(p, team))
    return Status::NotFound("no team '" + team + "'");
  ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, team));
  if (role && !model::isTeamRole(*role))
    return Status::InvalidArgument(
        "role: a team role is viewer, member or team-admin; platform admin is a flag of the user",
        "role");
  // One answer for a user who does not exist and one the caller may not see: a team-admin learns
  // no names from here. A team-admin adds only people who already share a team with them
  // (anyone else is a platform admin's to add), and a service account only if they manage all
  // of its teams: adding another team's account would let them mint its tokens.
  const Status noUser = Status::NotFound("no user '" + user + "' in a team of yours");
  auto it = world_.users.find(user);
  if (it == world_.users.end() || !authz::canSeeUser(p, it->second)) return noUser;
  model::User u = it->second;
  // Removing an account from one's own team only takes rights away: always the team-admin's.
  if (role && !p.isAdmin() && u.kind == model::UserKind::kService &&
      !authz::canManageServiceAccount(p, u).ok())
    return noUser;
  if (!role && !u.teams.count(team)) return noUser;
  if (u.source == model::UserSource::kLdap)
    return Status::FailedPrecondition("user '" + user +
                                      "' comes from the directory: their teams follow their "
                                      "groups at each login (see [ldap.groups])");
  const bool joins = role && !u.teams.count(team);
  if (role) {
    u.teams[team] = *role;
  } else {
    u.teams.erase(team);
  }
  Change<model::User> c;
  // As the caller may see it: a team-admin who removed x from their team learns nothing of x's
  // other teams from the reply (a review found them in it).
  c.value = seenBy(p, u);
  world_.users[user] = u;
  c.batch.add(store::PutUser{u});
  if (joins) revokeTokensGivenByOthers(u, c.batch);
  if (!role) {
    membership_.leftTeams(u, c.batch);
    c.pushHosts = world_.sessionHostsOf(u.name);  // a session of a team left takes no more keys
  }
  return c;
}

Result<std::vector<std::pair<model::User, model::Role>>> AccessService::teamMembers(
    const Principal& p, const std::string& team) const {
  if (!world_.teams.count(team) || !authz::canSeeTeam(p, team))
    return Status::NotFound("no team '" + team + "'");
  std::vector<std::pair<model::User, model::Role>> out;
  for (const auto& [name, u] : world_.users) {
    if (auto role = u.roleIn(team)) out.emplace_back(u, *role);
  }
  return out;
}

Result<Change<CreatedToken>> AccessService::createToken(const Principal& p, const NewToken& t) {
  if (!p.isUser()) return Status::PermissionDenied("hosts cannot create tokens");
  const std::string owner = t.user.empty() ? p.name : t.user;
  auto it = world_.users.find(owner);
  if (it == world_.users.end()) return Status::NotFound("no user '" + owner + "'");
  if (owner != p.name) ALLOT_RETURN_IF_ERROR(authz::canManageServiceAccount(p, it->second));
  if (!t.name.empty()) ALLOT_RETURN_IF_ERROR(validateName(t.name, "name"));
  if (t.ttlMs < 0 || t.ttlMs > kMaxTokenTtlMs)
    return Status::InvalidArgument("expires_in: must be positive and at most 10 years (or none)",
                                   "expires_in");
  size_t held = std::count_if(world_.tokens.begin(), world_.tokens.end(), [&](const auto& kv) {
    return kv.second.owner == owner && kv.second.kind == model::TokenKind::kApi;
  });
  if (held >= kMaxTokensPerUser)
    return Status::FailedPrecondition("user '" + owner + "' already has " +
                                      std::to_string(kMaxTokensPerUser) +
                                      " tokens; revoke some first");
  Change<CreatedToken> c;
  const TimeMs now = clock_.nowMs();
  c.value = mintToken({"", owner, "", now, t.ttlMs ? now + t.ttlMs : 0, t.name}, "tok", c.batch);
  return c;
}

Result<std::vector<model::ApiToken>> AccessService::listTokens(const Principal& p,
                                                               const std::string& user) const {
  if (!p.isUser()) return Status::PermissionDenied("hosts cannot list tokens");
  const std::string owner = user.empty() ? p.name : user;
  if (owner != p.name) {
    auto it = world_.users.find(owner);
    if (it == world_.users.end()) return Status::NotFound("no user '" + owner + "'");
    ALLOT_RETURN_IF_ERROR(authz::canManageServiceAccount(p, it->second));
  }
  std::vector<model::ApiToken> out;
  for (const auto& [id, tok] : world_.tokens) {
    if (tok.owner == owner && tok.kind != model::TokenKind::kHost) out.push_back(tok);
  }
  return out;
}

Result<Change<model::ApiToken>> AccessService::revokeToken(const Principal& p,
                                                           const std::string& id) {
  auto it = world_.tokens.find(id);
  Status notFound = Status::NotFound("no token '" + id + "'");
  if (!p.isUser() || it == world_.tokens.end() || it->second.kind == model::TokenKind::kHost)
    return notFound;
  const model::ApiToken tok = it->second;
  if (tok.owner != p.name) {
    auto u = world_.users.find(tok.owner);
    if (u == world_.users.end() || !authz::canManageServiceAccount(p, u->second).ok())
      return notFound;
  }
  Change<model::ApiToken> c;
  c.value = tok;
  world_.tokens.erase(it);
  c.batch.add(store::DeleteToken{id});
  return c;
}

void AccessService::revokeHostCredentials(const std::string& host, store::WriteBatch& batch) {
  // Called each second for every retired host (HostService::enforceDrains): one name built.
  const std::string owner = "host:" + host;
  for (auto t = world_.tokens.begin(); t != world_.tokens.end();) {
    if (t->second.owner == owner) {
      batch.add(store::DeleteToken{t->first});
      t = world_.tokens.erase(t);
    } else {
      ++t;
    }
  }
}

}  // namespace allot::control
