// Who am I, accounts, team membership, API tokens and SSH keys (docs/access.md).

#include "api/route_helpers.h"
#include "auth/csrf.h"
#include "control/authz.h"

namespace allot::api {
namespace {

using control::Principal;
using nlohmann::json;

// A team role from the body's or query's text; platform admin is not one.
Result<model::Role> parseTeamRole(const std::string& text, const char* field) {
  auto role = model::parseRole(text);
  if (!role || !model::isTeamRole(*role))
    return Status::InvalidArgument(
        std::string(field) + ": must be 'viewer', 'member' or 'team-admin', got '" + text + "'",
        field);
  return *role;
}

// POST /users: `teams` ({"ml": "member"}), or the older `team` with `role` (where role
// "platform-admin" makes a platform admin).
Result<control::NewUser> readNewUser(const JsonInput& in) {
  control::NewUser n;
  auto name = in.requiredString("name");
  if (!name.ok()) return name.status();
  n.name = *name;
  auto teams = in.optionalStringMap("teams");
  if (!teams.ok()) return teams.status();
  for (const auto& [team, roleText] : *teams) {
    auto role = parseTeamRole(roleText, "teams");
    if (!role.ok()) return role.status();
    n.teams[team] = *role;
  }
  auto team = in.optionalString("team");
  auto roleText = in.optionalString("role", "member");
  if (!team.ok()) return team.status();
  if (!roleText.ok()) return roleText.status();
  auto role = model::parseRole(*roleText);
  if (!role)
    return Status::InvalidArgument(
        "role: must be 'viewer', 'member', 'team-admin' or "
        "'platform-admin', got '" +
            *roleText + "'",
        "role");
  auto admin = in.optionalBool("platform_admin", *role == model::Role::kPlatformAdmin);
  if (!admin.ok()) return admin.status();
  n.platformAdmin = *admin;
  if (!team->empty()) {
    if (n.teams.count(*team)) return Status::InvalidArgument("team: also in teams", "team");
    n.teams[*team] = *role == model::Role::kPlatformAdmin ? model::Role::kTeamAdmin : *role;
  } else if (in.has("role") && *role != model::Role::kPlatformAdmin) {
    return Status::InvalidArgument("team: a " + *roleText + " must belong to a team", "team");
  }
  auto kind = in.optionalString("kind", "human");
  if (!kind.ok()) return kind.status();
  if (*kind != "human" && *kind != "service")
    return Status::InvalidArgument("kind: must be 'human' or 'service', got '" + *kind + "'",
                                   "kind");
  n.kind = *kind == "service" ? model::UserKind::kService : model::UserKind::kHuman;
  return n;
}

json whoamiJson(const Principal& p, const Result<model::User>& u) {
  json teams = json::object();
  for (const auto& [team, role] : p.teams) teams[team] = model::roleName(role);
  const std::string sole = p.soleTeam();
  // `team` and `role` summarise for people and older clients: the only team and the role in it.
  std::string role = p.isAdmin()     ? "platform-admin"
                     : !sole.empty() ? model::roleName(p.teams.at(sole))
                                     : "";
  json out = {{"name", p.name},
              {"platform_admin", p.isAdmin()},
              {"teams", teams},
              {"team", sole.empty() ? json(nullptr) : json(sole)},
              {"role", role.empty() ? json(nullptr) : json(role)}};
  if (u.ok()) {
    out["kind"] = model::userKindName(u->kind);
    out["source"] = model::userSourceName(u->source);
  }
  return out;
}

// The `user` query parameter of routes that act for the caller unless it names someone else.
std::string queryUser(const ApiRequest& r) {
  auto it = r.query.find("user");
  return it == r.query.end() ? "" : it->second;
}

}  // namespace

void registerAccessRoutes(Router& router, Server& s) {
  using V = http::verb;
  registerLoginRoutes(router, s);

  router.add(V::get, "/api/v1/whoami", [&s](ApiRequest& r) -> Awaitable {
    auto out = whoamiJson(r.who(), s.cluster().access().getUser(r.who(), r.who().name));
    // The console reloads without its login reply; the cookie is HttpOnly, so it learns the
    // CSRF token here (a GET that other sites cannot read).
    if (r.viaCookie) out["csrf_token"] = auth::csrfTokenFor(sessionSecretOf(r.raw));
    co_return ApiResponse::json(out);
  });

  // ---- accounts ----
  router.add(V::post, "/api/v1/users", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(
        in, readBody(r, {"name", "teams", "team", "role", "platform_admin", "kind", "password"}));
    TRY_ASSIGN(n, readNewUser(in));
    if (Status st = s.cluster().access().checkNewUser(r.who(), n); !st.ok())
      co_return ApiResponse::error(st);
    // A local account of a directory user's name would take their logins: a local account is
    // checked first (docs/login.md), so they could not log in, and whoever set its password could
    // as them. Asked only of someone who may create the account, so the directory is not a
    // member's to flood with searches.
    auto inDirectory = co_await s.login().directoryHasUser(n.name);
    if (!inDirectory.ok()) co_return unavailableResponse(inDirectory.status());
    if (*inDirectory)
      co_return ApiResponse::error(
          Status::AlreadyExists("name: '" + n.name +
                                "' is a user of the directory, who logs in with their directory "
                                "password; choose another name"));
    if (in.has("password")) {
      TRY_ASSIGN(password, in.requiredString("password"));
      if (Status st = auth::checkPasswordPolicy(password, "password"); !st.ok())
        co_return ApiResponse::error(st);
      if (n.kind == model::UserKind::kService)
        co_return ApiResponse::error(Status::InvalidArgument(
            "password: service accounts log in with tokens only", "password"));
      auto hash = co_await s.login().hashPassword(password);
      if (!hash.ok()) co_return unavailableResponse(hash.status());
      n.passwordHash = *hash;
    }
    TRY_ASSIGN(change, s.cluster().access().createUser(r.who(), std::move(n)));
    co_await s.apply(r, change);
    auto out = model::toJson(change.value.user);
    out["token"] = change.value.token;
    co_return ApiResponse::json(out, http::status::created);
  });
  router.add(V::get, "/api/v1/users", [&s](ApiRequest& r) -> Awaitable {
    co_return ApiResponse::json(arrayOf(s.cluster().access().listUsers(r.who())));
  });
  router.add(V::get, "/api/v1/users/{name}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(u, s.cluster().access().getUser(r.who(), r.params.at("name")));
    co_return ApiResponse::json(model::toJson(u));
  });
  router.add(V::patch, "/api/v1/users/{name}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"platform_admin", "disabled"}));
    control::UserUpdate up;
    if (in.has("platform_admin")) {
      TRY_ASSIGN(v, in.optionalBool("platform_admin", false));
      up.platformAdmin = v;
    }
    if (in.has("disabled")) {
      TRY_ASSIGN(v, in.optionalBool("disabled", false));
      up.disabled = v;
    }
    TRY_ASSIGN(change, s.cluster().access().updateUser(r.who(), r.params.at("name"), up));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });

  // ---- team membership ----
  router.add(V::get, "/api/v1/teams/{team}/members", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(members, s.cluster().access().teamMembers(r.who(), r.params.at("team")));
    json arr = json::array();
    for (const auto& [u, role] : members) {
      arr.push_back({{"user", u.name},
                     {"role", model::roleName(role)},
                     {"kind", model::userKindName(u.kind)},
                     {"source", model::userSourceName(u.source)}});
    }
    co_return ApiResponse::json(arr);
  });
  router.add(V::put, "/api/v1/teams/{team}/members/{user}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"role"}));
    TRY_ASSIGN(roleText, in.optionalString("role", "member"));
    TRY_ASSIGN(role, parseTeamRole(roleText, "role"));
    TRY_ASSIGN(change, s.cluster().access().setMembership(r.who(), r.params.at("team"),
                                                          r.params.at("user"), role));
    co_await s.apply(r, change);
    co_return ApiResponse::json({{"team", r.params.at("team")},
                                 {"user", change.value.name},
                                 {"role", model::roleName(role)}});
  });
  router.add(V::delete_, "/api/v1/teams/{team}/members/{user}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(change, s.cluster().access().setMembership(r.who(), r.params.at("team"),
                                                          r.params.at("user"), std::nullopt));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });

  // ---- API tokens ----
  router.add(V::post, "/api/v1/tokens", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"name", "expires_in", "user"}));
    control::NewToken t;
    TRY_ASSIGN(name, in.optionalString("name"));
    TRY_ASSIGN(user, in.optionalString("user"));
    TRY_ASSIGN(expires, in.optionalString("expires_in"));
    t.name = name;
    t.user = user;
    if (!expires.empty() && expires != "never") {
      auto ms = parseDurationMs(expires);
      if (!ms.ok() || *ms <= 0)
        co_return ApiResponse::error(Status::InvalidArgument(
            "expires_in: a duration such as 30d or 12h, or 'never'; got '" + expires + "'",
            "expires_in"));
      t.ttlMs = *ms;
    }
    TRY_ASSIGN(change, s.cluster().access().createToken(r.who(), t));
    co_await s.apply(r, change);
    auto out = model::toJson(change.value.token);
    out["token"] = change.value.secret;
    co_return ApiResponse::json(out, http::status::created);
  });
  router.add(V::get, "/api/v1/tokens", [&s](ApiRequest& r) -> Awaitable {
    auto it = r.query.find("user");
    TRY_ASSIGN(tokens,
               s.cluster().access().listTokens(r.who(), it == r.query.end() ? "" : it->second));
    co_return ApiResponse::json(arrayOf(tokens));
  });
  router.add(V::delete_, "/api/v1/tokens/{id}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(change, s.cluster().access().revokeToken(r.who(), r.params.at("id")));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });

  // ---- SSH public keys (`?user=` for platform admins) ----
  router.add(V::get, "/api/v1/ssh-keys", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(keys, s.cluster().access().listSshKeys(r.who(), queryUser(r)));
    co_return ApiResponse::json(arrayOf(keys));
  });
  router.add(V::post, "/api/v1/ssh-keys", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"key"}));
    TRY_ASSIGN(line, in.requiredString("key"));
    TRY_ASSIGN(change, s.cluster().access().addSshKey(r.who(), queryUser(r), line));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value), http::status::created);
  });
  router.add(V::delete_, "/api/v1/ssh-keys/{fingerprint}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(change, s.cluster().access().removeSshKey(r.who(), queryUser(r),
                                                         r.params.at("fingerprint")));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });
}

}  // namespace allot::api
