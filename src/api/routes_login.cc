// Login, logout and passwords (docs/login.md). Passwords are checked and hashed on the
// LoginService's pool, never on the I/O thread; secrets never reach the log or an error text.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

#include "api/route_helpers.h"
#include "auth/csrf.h"
#include "common/ascii.h"
#include "control/authz.h"
#include "control/names.h"

namespace allot::api {
namespace {

using nlohmann::json;

const Status kInvalidLogin = Status::Unauthenticated("invalid user name or password");

ApiResponse tooManyFailures(int64_t seconds) {
  ApiResponse res = ApiResponse::error(Status::Unavailable(
      "too many failed logins for this account or from this address; try again in " +
      std::to_string(seconds) + "s"));
  res.status = http::status::too_many_requests;
  res.headers.emplace_back("Retry-After", std::to_string(seconds));
  return res;
}

ApiResponse failedResponse(const Status& st) {
  return st.code() == Code::kUnavailable ? unavailableResponse(st) : ApiResponse::error(st);
}

// The outcome of checking a user name and password: the account to log in as, or why not.
// `countsAsFailure`: a wrong guess, which the limiters count (an unreachable directory is not).
struct Checked {
  Status status;
  bool countsAsFailure = false;
};

// Local accounts verify their Argon2id hash; everyone else asks the directory, when there is
// one. Unknown users, service accounts and accounts without a password fail exactly as a wrong
// password does. A directory user's synced account joins the login's write (and its audit entry).
boost::asio::awaitable<Checked> checkLogin(Server& s, ApiRequest& r, const std::string& user,
                                           const std::string& password) {
  const auto& users = s.cluster().world().users;
  auto it = users.find(user);
  const bool local = it != users.end() && it->second.source == model::UserSource::kLocal;
  if (local) {
    const model::User& u = it->second;
    if (u.kind != model::UserKind::kHuman || u.disabled || u.passwordHash.empty()) {
      co_await s.login().spendVerifyTime(password);
      co_return Checked{kInvalidLogin, true};
    }
    auto ok = co_await s.login().verifyPassword(u.passwordHash, password);
    if (!ok.ok()) co_return Checked{ok.status(), false};
    co_return *ok ? Checked{Status::Ok(), false} : Checked{kInvalidLogin, true};
  }
  if (!s.login().directoryEnabled()) {
    co_await s.login().spendVerifyTime(password);
    co_return Checked{kInvalidLogin, true};
  }
  auto found = co_await s.login().directoryLogin(user, password);
  if (!found.ok()) {
    if (found.status().code() == Code::kUnavailable)
      spdlog::warn("login: directory unavailable: {}", found.status().message());
    co_return Checked{found.status(), found.status().code() == Code::kUnauthenticated};
  }
  auto access = auth::mapGroups(s.login().config().ldap, *found);
  if (!access.ok()) co_return Checked{access.status(), false};
  control::DirectoryLogin login{user, access->teams, access->platformAdmin, found->uid, found->gid};
  auto synced = s.cluster().access().syncDirectoryUser(login);
  if (!synced.ok()) co_return Checked{synced.status(), false};
  co_await s.apply(r, *synced);
  co_return Checked{Status::Ok(), false};
}

// Login CSRF: a cross-site form may post a text/plain body that parses as JSON (a field name
// holding most of the object) and the browser keeps the cookie of the answer, logging the victim's
// console in as the attacker. A form cannot send application/json, and a script of another site
// cannot without a CORS preflight that allotd never grants; a browser also says when a request is
// cross-site. nullopt when the request may log in.
std::optional<ApiResponse> refuseForeignLogin(const ApiRequest& r) {
  std::string type(r.raw[http::field::content_type]);
  type = type.substr(0, type.find(';'));
  while (!type.empty() && type.back() == ' ') type.pop_back();
  if (!asciiIEquals(type, "application/json")) {
    ApiResponse res = ApiResponse::error(Status::InvalidArgument(
        "Content-Type: a login is sent as application/json", "Content-Type"));
    res.status = http::status::unsupported_media_type;
    return res;
  }
  if (asciiIEquals(r.raw["Sec-Fetch-Site"], "cross-site"))
    return ApiResponse::error(
        Status::PermissionDenied("a login must come from allotd's own console, not another site"));
  return std::nullopt;
}

// A user name as allotd spells names (lower case, [a-z0-9._-]). Anything else names no account
// here or in the directory, whose own rules (case, spaces around a name) would otherwise let one
// person be guessed at under many spellings, each with a failure limit of its own.
bool loginNameIsValid(const std::string& user) { return control::validateName(user, "user").ok(); }

}  // namespace

void registerLoginRoutes(Router& router, Server& s) {
  using V = http::verb;

  router.add(
      V::post, "/api/v1/login",
      [&s](ApiRequest& r) -> Awaitable {
        if (auto refused = refuseForeignLogin(r)) co_return *refused;
        TRY_ASSIGN(in, readBody(r, {"user", "password", "session"}));
        TRY_ASSIGN(typed, in.requiredString("user"));
        // Allot's names are lower case and directories compare names without case: one
        // spelling per person, for the lookup, the failure limit and the account made.
        std::string user = typed;
        std::transform(user.begin(), user.end(), user.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        TRY_ASSIGN(password, in.requiredString("password"));
        TRY_ASSIGN(session, in.optionalBool("session", false));
        if (password.size() > auth::kMaxPasswordBytes) co_return ApiResponse::error(kInvalidLogin);
        if (int64_t wait = s.login().retryAfterSeconds(user, r.peer); wait > 0) {
          spdlog::warn("login: refused for user '{}' from {}: too many failures", user, r.peer);
          co_return tooManyFailures(wait);
        }
        const bool named = loginNameIsValid(user);
        const auto attempt = s.login().beginAttempt(named ? user : "", r.peer);
        if (!named) {
          // As an unknown user fails, in time too; counted against the address.
          co_await s.login().spendVerifyTime(password);
          s.login().loginFailedFrom(r.peer);
          co_return ApiResponse::error(kInvalidLogin);
        }
        Checked checked = co_await checkLogin(s, r, user, password);
        if (!checked.status.ok()) {
          if (checked.countsAsFailure) s.login().loginFailed(user, r.peer);
          spdlog::info("login: failed for user '{}' from {}: {}", user, r.peer,
                       checked.status.message());
          co_return failedResponse(checked.status);
        }
        s.login().loginSucceeded(user);
        const auto kind = session ? model::TokenKind::kSession : model::TokenKind::kApi;
        const auto& cfg = s.login().config();
        TRY_ASSIGN(issued, s.cluster().access().issueLoginToken(
                               user, kind, session ? cfg.sessionLifetimeMs : cfg.cliTokenTtlMs));
        co_await s.apply(r, issued);
        const auto& tok = issued.value.token;
        spdlog::info("login: user '{}' from {} ({}, token {})", user, r.peer,
                     session ? "console session" : "api token", tok.id);
        json out = {{"user", user},
                    {"token_id", tok.id},
                    {"expires_at", model::toJson(tok).value("expires_at", json(nullptr))}};
        if (!session) {
          out["token"] = issued.value.secret;
          co_return ApiResponse::json(out);
        }
        s.login().sessionStarted(tok.id);
        out["csrf_token"] = auth::csrfTokenFor(issued.value.secret);
        auto res = ApiResponse::json(out);
        res.headers.emplace_back("Set-Cookie", s.login().sessionCookie(issued.value.secret));
        co_return res;
      },
      /*authenticated=*/false);

  router.add(V::post, "/api/v1/logout", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(ended, s.cluster().access().endSession(r.credentialId));
    co_await s.apply(r, ended);
    s.login().sessionEnded(r.credentialId);
    auto res = ApiResponse::json({{"logged_out", true}, {"token_id", r.credentialId}});
    if (r.viaCookie) res.headers.emplace_back("Set-Cookie", s.login().clearedSessionCookie());
    co_return res;
  });

  router.add(V::put, "/api/v1/users/{name}/password", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"password", "current_password"}));
    TRY_ASSIGN(password, in.requiredString("password"));
    TRY_ASSIGN(current, in.optionalString("current_password"));
    const std::string& name = r.params.at("name");
    TRY_ASSIGN(target, s.cluster().access().getUser(r.who(), name));
    if (Status st = auth::checkPasswordPolicy(password, "password"); !st.ok())
      co_return ApiResponse::error(st);
    if (name != r.who().name) {
      // Platform admins reset others' passwords without knowing them.
      if (Status st = control::authz::requireAdmin(r.who(), "set another user's password");
          !st.ok())
        co_return ApiResponse::error(st);
    } else if (!target.passwordHash.empty()) {
      // Changing one's own password needs the current one, so a stolen session cannot lock the
      // owner out. A first password (an account that had only tokens, like the admin that
      // allotd creates) has none to give: the caller's credential is the proof.
      if (current.empty())
        co_return ApiResponse::error(Status::InvalidArgument(
            "current_password: required to change your own password", "current_password"));
      // Guesses here count as failed logins: a stolen session could otherwise try the owner's
      // password without limit, and keep the account once the session is revoked.
      if (int64_t wait = s.login().retryAfterSeconds(name, r.peer); wait > 0)
        co_return tooManyFailures(wait);
      const auto attempt = s.login().beginAttempt(name, r.peer);
      auto ok = co_await s.login().verifyPassword(target.passwordHash, current);
      if (!ok.ok()) co_return failedResponse(ok.status());
      if (!*ok) {
        s.login().loginFailed(name, r.peer);
        co_return ApiResponse::error(Status::PermissionDenied("current_password: wrong"));
      }
    }
    auto hash = co_await s.login().hashPassword(password);
    if (!hash.ok()) co_return failedResponse(hash.status());
    control::UserUpdate up;
    up.passwordHash = *hash;
    if (name == r.who().name) up.keepTokenId = r.credentialId;
    TRY_ASSIGN(change, s.cluster().access().updateUser(r.who(), name, up));
    co_await s.apply(r, change);
    spdlog::info("password of user '{}' set by '{}'", name, r.who().name);
    co_return ApiResponse::json(model::toJson(change.value));
  });
}

}  // namespace allot::api
