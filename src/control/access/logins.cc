// Logins: tokens a password or directory login earns, directory users kept in step with their
// groups, and the end of console sessions (docs/login.md). Checking passwords and talking to
// the directory happen off the I/O thread in the API layer; these only change the world.

#include <set>

#include "control/access/access_service.h"
#include "control/names.h"

namespace allot::control {
namespace {

// Deletes the tokens of `owner` that `drop` picks.
template <typename Pred>
void dropTokens(World& w, const std::string& owner, Pred drop, store::WriteBatch& b) {
  for (auto it = w.tokens.begin(); it != w.tokens.end();) {
    const auto& t = it->second;
    if (t.owner == owner && drop(t)) {
      b.add(store::DeleteToken{t.id});
      it = w.tokens.erase(it);
    } else {
      ++it;
    }
  }
}

// An owner's expired login tokens go when they log in again, so repeated logins do not pile up.
void dropExpiredTokens(World& w, const std::string& owner, TimeMs now, store::WriteBatch& b) {
  dropTokens(
      w, owner, [now](const model::ApiToken& t) { return t.expiresAt != 0 && t.expiresAt <= now; },
      b);
}

}  // namespace

Result<Change<CreatedToken>> AccessService::issueLoginToken(const std::string& user,
                                                            model::TokenKind kind, int64_t ttlMs) {
  auto it = world_.users.find(user);
  if (it == world_.users.end() || it->second.disabled)
    return Status::Unauthenticated("invalid user name or password");
  Change<CreatedToken> c;
  const TimeMs now = clock_.nowMs();
  dropExpiredTokens(world_, user, now, c.batch);
  c.value = mintToken({"", user, "", now, ttlMs > 0 ? now + ttlMs : 0,
                       kind == model::TokenKind::kSession ? "console" : "login", kind},
                      "tok", c.batch);
  return c;
}

Result<Change<model::User>> AccessService::syncDirectoryUser(const DirectoryLogin& login) {
  auto it = world_.users.find(login.name);
  if (it != world_.users.end() && it->second.source != model::UserSource::kLdap)
    return Status::FailedPrecondition("user '" + login.name +
                                      "' is a local account; the directory cannot log in as it");
  if (it == world_.users.end()) ALLOT_RETURN_IF_ERROR(validateName(login.name, "user"));
  model::User u = it == world_.users.end() ? model::User{} : it->second;
  if (u.disabled) return Status::Unauthenticated("invalid user name or password");
  if (it == world_.users.end()) {
    u.name = login.name;
    u.source = model::UserSource::kLdap;
    u.createdAt = clock_.nowMs();
    u.createdBy = "ldap";
  }
  // Groups may name teams Allot does not have (yet): those grant nothing.
  u.teams.clear();
  for (const auto& [team, role] : login.teams) {
    if (world_.teams.count(team)) u.teams[team] = role;
  }
  u.platformAdmin = login.platformAdmin;
  if (u.teams.empty() && !u.platformAdmin)
    return Status::PermissionDenied("user '" + login.name +
                                    "' is in no directory group that grants access to an existing "
                                    "team; ask an administrator");
  Change<model::User> c;
  if (login.uid >= 0) {
    // The posixAccount's ids, unless they clash with allotd's ranges or another user.
    ALLOT_RETURN_IF_ERROR(checkDirectoryIds(u.name, login.uid, login.gid));
    u.uid = login.uid;
    u.gid = login.gid >= 0 ? login.gid : login.uid;
  } else {
    ALLOT_RETURN_IF_ERROR(assignUnixIds(u, c.batch));  // not a posixAccount: allotd's ids
  }
  c.value = u;
  world_.users[u.name] = u;
  c.batch.add(store::PutUser{u});
  membership_.leftTeams(u, c.batch);  // the directory may have taken a group away
  return c;
}

std::vector<std::string> AccessService::directoryUsersWithTokens() const {
  const TimeMs now = clock_.nowMs();
  std::set<std::string> out;
  for (const auto& [id, t] : world_.tokens) {
    if (t.expiresAt != 0 && t.expiresAt <= now) continue;
    auto u = world_.users.find(t.owner);
    // A disabled account's tokens grant nothing already.
    if (u != world_.users.end() && u->second.source == model::UserSource::kLdap &&
        !u->second.disabled)
      out.insert(t.owner);
  }
  return {out.begin(), out.end()};
}

Result<Change<model::User>> AccessService::withdrawDirectoryUser(const std::string& name) {
  auto it = world_.users.find(name);
  if (it == world_.users.end() || it->second.source != model::UserSource::kLdap)
    return Status::NotFound("no directory user '" + name + "'");
  Change<model::User> c;
  model::User u = it->second;
  u.teams.clear();
  u.platformAdmin = false;
  c.value = u;
  world_.users[name] = u;
  c.batch.add(store::PutUser{u});
  membership_.leftTeams(u, c.batch);
  dropTokens(
      world_, name, [](const model::ApiToken&) { return true; }, c.batch);
  return c;
}

Result<Change<model::ApiToken>> AccessService::endSession(const std::string& tokenId) {
  auto it = world_.tokens.find(tokenId);
  if (it == world_.tokens.end()) return Status::NotFound("no token '" + tokenId + "'");
  Change<model::ApiToken> c;
  c.value = it->second;
  world_.tokens.erase(it);
  c.batch.add(store::DeleteToken{tokenId});
  return c;
}

}  // namespace allot::control
