#pragma once
// LoginService: the slow and stateful parts of logging in, for the routes and the request
// authentication of Server. Owns the worker pool that hashes passwords and binds to the
// directory (off the I/O thread, bounded: a full queue is a 503 with Retry-After), the
// in-memory failure limiters, and console sessions' idle clocks. Everything but the pool's own
// work runs on the I/O thread.

#include <boost/asio/awaitable.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/http_types.h"
#include "api/session_origin.h"
#include "auth/failure_limiter.h"
#include "auth/ldap_directory.h"
#include "auth/login_config.h"
#include "auth/worker_pool.h"
#include "common/clock.h"
#include "control/cluster.h"

namespace allot::api {

inline constexpr const char* kSessionCookie = "allot_session";
inline constexpr const char* kCsrfHeader = "X-CSRF-Token";

// Who a request comes from, as its credentials say.
struct RequestCredential {
  std::optional<control::Principal> principal;
  std::string tokenId;     // the token's public id, for logout
  std::string secret;      // the bearer token or cookie value; never logged
  bool viaCookie = false;  // a console session: its writes need the CSRF header
  Status error;            // why there is no principal (401 or 403)
};

// The failure limiters of logins, per account and per client address.
struct LoginLimiters {
  auth::FailureLimiter account;
  auth::FailureLimiter address;
};

// A login (or a check of a current password) under way, counted by the limiters as if it had
// failed until it ends: guesses sent at once must not all pass the limit before the first fails.
// Holds the limiters it counts in, since a request's coroutine can outlive the LoginService when
// allotd stops.
class LoginAttempt {
 public:
  LoginAttempt(std::shared_ptr<LoginLimiters> limiters, std::string account, std::string client);
  LoginAttempt(const LoginAttempt&) = delete;
  LoginAttempt& operator=(const LoginAttempt&) = delete;
  ~LoginAttempt();

 private:
  std::shared_ptr<LoginLimiters> limiters_;
  std::string account_;  // "" when the name is none an account may have
  std::string client_;
};

class LoginService {
 public:
  LoginService(auth::LoginConfig config, const Clock& clock);
  // With a pool of the caller's (tests: one they can fill up).
  LoginService(auth::LoginConfig config, const Clock& clock,
               std::unique_ptr<auth::WorkerPool> pool);

  const auth::LoginConfig& config() const { return config_; }
  bool directoryEnabled() const { return directory_.has_value(); }

  // Off the I/O thread. Unavailable("... busy") when the pool's queue is full.
  boost::asio::awaitable<Result<std::string>> hashPassword(std::string password);
  boost::asio::awaitable<Result<bool>> verifyPassword(std::string hash, std::string password);
  boost::asio::awaitable<Result<auth::DirectoryUser>> directoryLogin(std::string user,
                                                                     std::string password);
  // Whether the directory has a user of that name (false without a directory).
  boost::asio::awaitable<Result<bool>> directoryHasUser(std::string user);
  // The user's entry and groups as the directory has them now (auth::LdapDirectory::lookup).
  boost::asio::awaitable<Result<auth::DirectoryUser>> directoryLookup(std::string user);
  // A login that fails without a hash to check (no such user, a service account, a disabled
  // one) spends what checking one costs, against a decoy hash made once: how long the answer
  // takes must not tell whether the account exists.
  boost::asio::awaitable<void> spendVerifyTime(std::string password);

  // The bearer token, else the session cookie; for a cookie, the session must not have been
  // idle too long, and a request that is not GET or HEAD must carry the CSRF header (unless
  // `csrfToken` is false: the session proxy checks Origin instead, since Jupyter's pages cannot
  // know our header). On an idle session, `expiredSessionId` names the token to delete.
  RequestCredential authenticate(const HttpRequest& req, const control::Cluster& cluster,
                                 std::string* expiredSessionId, bool csrfToken = true);
  // Whether a credential that authenticated earlier (a live stream's) still would, without
  // counting as activity: a session stays subject to its idle limit however long a stream that
  // it opened stays open.
  bool stillValid(const std::string& secret, bool viaCookie, const control::Cluster& cluster) const;
  // A session's idle clock starts at login, and stops at logout.
  void sessionStarted(const std::string& tokenId) { sessionSeen_[tokenId] = clock_.nowMs(); }
  void sessionEnded(const std::string& tokenId) { sessionSeen_.erase(tokenId); }

  // Failure limiting (auth/failure_limiter.h): seconds to wait, 0 when the login may proceed.
  // Addresses count by client (api/connection_limit.h clientKey: an IPv6 address by its /64).
  // Attempts under way count; begin one, with no co_await in between, once this says 0.
  int64_t retryAfterSeconds(const std::string& user, const std::string& address) const;
  // `user` "" for a name no account may have: the address's alone.
  std::unique_ptr<LoginAttempt> beginAttempt(const std::string& user, const std::string& address);
  void loginFailed(const std::string& user, const std::string& address);
  // A failure that names no account (a name no account may have): the address's alone.
  void loginFailedFrom(const std::string& address);
  void loginSucceeded(const std::string& user) { limiters_->account.recordSuccess(user); }

  // Set-Cookie values.
  std::string sessionCookie(const std::string& secret) const;
  // Session `id`'s own origin's cookie (api/session_origin.h), holding `credential`: for its
  // path only, and Lax, since the browser arrives there by a redirect from the console's origin.
  std::string sessionOriginCookie(const std::string& credential, int64_t id) const;
  // How long a console session (and so a session origin's cookie) may last at most.
  int64_t sessionLifetimeMs() const { return config_.sessionLifetimeMs; }
  std::string clearedSessionCookie() const;

 private:
  auth::LoginConfig config_;
  const Clock& clock_;
  std::optional<auth::LdapDirectory> directory_;
  std::shared_ptr<LoginLimiters> limiters_;
  std::map<std::string, TimeMs> sessionSeen_;  // session token id -> last request
  std::string decoyHash_;                      // spendVerifyTime's; made on first use
  // Last: its threads post results to the I/O context, so it stops before anything else goes.
  std::unique_ptr<auth::WorkerPool> pool_;
};

// The bearer token of the Authorization header ("" when none).
std::string bearerTokenOf(const HttpRequest& req);
// The session cookie's value ("" when none).
std::string sessionSecretOf(const HttpRequest& req);
// The value of the cookie `name` in a Cookie header when it is there exactly once; "" otherwise.
// Twice is refused, not resolved: a second one is what a page of a sibling domain (a session's)
// would toss in to log the console in as someone else.
std::string uniqueCookie(std::string_view header, std::string_view name);
// Every value of the cookie `name` in a Cookie header, in order.
std::vector<std::string_view> cookieValues(std::string_view header, std::string_view name);

// 503 with Retry-After: the hashing pool is full or the directory is unreachable.
ApiResponse unavailableResponse(const Status& st);

}  // namespace allot::api
