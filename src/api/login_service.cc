#include "api/login_service.h"

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "api/connection_limit.h"
#include "auth/csrf.h"
#include "common/secrets.h"

namespace allot::api {
namespace {

namespace asio = boost::asio;

// Runs `work` on `pool` and resumes the calling coroutine on its own executor with the result;
// Unavailable at once when the pool's queue is full. The work is shared, not passed through
// co_await expressions: GCC 12 mishandles temporaries there (double destruction).
template <typename T>
asio::awaitable<Result<T>> offload(auth::WorkerPool& pool,
                                   std::shared_ptr<std::function<Result<T>()>> work) {
  auto ex = co_await asio::this_coro::executor;
  auto initiate = [&pool, ex, work](auto handler) {
    auto h = std::make_shared<decltype(handler)>(std::move(handler));
    bool queued = pool.trySubmit([h, ex, work] {
      auto r = std::make_shared<Result<T>>((*work)());
      // The handler moves out before it resumes the coroutine: the copy of `h` that this pool
      // thread drops afterwards holds only an empty shell.
      asio::post(ex, [h, r] {
        auto resume = std::move(*h);
        std::move(resume)(std::move(*r));
      });
    });
    if (!queued) {
      asio::post(ex, [h] {
        auto resume = std::move(*h);
        std::move(resume)(Result<T>(
            Status::Unavailable("login: too many password checks in progress; try again shortly")));
      });
    }
  };
  Result<T> result = co_await asio::async_initiate<decltype(asio::use_awaitable), void(Result<T>)>(
      initiate, asio::use_awaitable);
  co_return result;
}

bool isSafeMethod(http::verb v) { return v == http::verb::get || v == http::verb::head; }

}  // namespace

LoginService::LoginService(auth::LoginConfig config, const Clock& clock)
    : LoginService(config, clock,
                   std::make_unique<auth::WorkerPool>(config.hashWorkers, config.hashQueue)) {}

LoginService::LoginService(auth::LoginConfig config, const Clock& clock,
                           std::unique_ptr<auth::WorkerPool> pool)
    : config_(std::move(config)),
      clock_(clock),
      limiters_(std::make_shared<LoginLimiters>(LoginLimiters{
          auth::FailureLimiter(config_.accountLimit), auth::FailureLimiter(config_.addressLimit)})),
      pool_(std::move(pool)) {
  if (config_.ldap.enabled()) directory_.emplace(config_.ldap);
}

asio::awaitable<Result<std::string>> LoginService::hashPassword(std::string password) {
  const auto cost = config_.passwordCost;
  auto work = std::make_shared<std::function<Result<std::string>()>>(
      [cost, password] { return auth::hashPassword(password, cost); });
  Result<std::string> r = co_await offload<std::string>(*pool_, work);
  co_return r;
}

asio::awaitable<Result<bool>> LoginService::verifyPassword(std::string hash, std::string password) {
  auto work = std::make_shared<std::function<Result<bool>()>>(
      [hash, password] { return Result<bool>(auth::verifyPassword(hash, password)); });
  Result<bool> r = co_await offload<bool>(*pool_, work);
  co_return r;
}

asio::awaitable<void> LoginService::spendVerifyTime(std::string password) {
  if (decoyHash_.empty()) {
    auto made = co_await hashPassword(newToken("decoy_"));
    if (!made.ok()) co_return;
    decoyHash_ = *made;
  }
  (void)co_await verifyPassword(decoyHash_, std::move(password));
}

asio::awaitable<Result<auth::DirectoryUser>> LoginService::directoryLogin(std::string user,
                                                                          std::string password) {
  if (!directory_) co_return Status::Unauthenticated("invalid user name or password");
  const auth::LdapDirectory* dir = &*directory_;
  auto work = std::make_shared<std::function<Result<auth::DirectoryUser>()>>(
      [dir, user, password] { return dir->login(user, password); });
  Result<auth::DirectoryUser> r = co_await offload<auth::DirectoryUser>(*pool_, work);
  co_return r;
}

asio::awaitable<Result<auth::DirectoryUser>> LoginService::directoryLookup(std::string user) {
  if (!directory_) co_return Status::Unauthenticated("no directory");
  const auth::LdapDirectory* dir = &*directory_;
  auto work = std::make_shared<std::function<Result<auth::DirectoryUser>()>>(
      [dir, user] { return dir->lookup(user); });
  Result<auth::DirectoryUser> r = co_await offload<auth::DirectoryUser>(*pool_, work);
  co_return r;
}

asio::awaitable<Result<bool>> LoginService::directoryHasUser(std::string user) {
  if (!directory_) co_return false;
  const auth::LdapDirectory* dir = &*directory_;
  auto work =
      std::make_shared<std::function<Result<bool>()>>([dir, user] { return dir->hasUser(user); });
  Result<bool> r = co_await offload<bool>(*pool_, work);
  co_return r;
}

RequestCredential LoginService::authenticate(const HttpRequest& req,
                                             const control::Cluster& cluster,
                                             std::string* expiredSessionId, bool csrfToken) {
  RequestCredential out;
  out.secret = bearerTokenOf(req);
  if (out.secret.empty()) {
    out.secret = sessionSecretOf(req);
    out.viaCookie = !out.secret.empty();
  }
  if (out.secret.empty()) {
    out.error = Status::Unauthenticated(
        "missing credentials (Authorization: Bearer <token>, or a console session cookie)");
    return out;
  }
  out.tokenId = out.secret.substr(0, out.secret.find('_'));
  auto tok = cluster.world().tokens.find(out.tokenId);
  const bool isSession =
      tok != cluster.world().tokens.end() && tok->second.kind == model::TokenKind::kSession;
  out.principal = cluster.access().authenticate(out.secret);
  // A session token is only good as the cookie (where idle time and CSRF are checked), and the
  // cookie only carries session tokens.
  if (!out.principal || isSession != out.viaCookie) {
    out.principal.reset();
    out.error = Status::Unauthenticated(out.viaCookie ? "session expired or ended; log in again"
                                                      : "invalid or expired token");
    return out;
  }
  if (!out.viaCookie) return out;
  const TimeMs now = clock_.nowMs();
  auto [seen, fresh] = sessionSeen_.emplace(out.tokenId, now);
  // After a restart the idle clock starts again at the first request: it is kept in memory.
  if (!fresh && now - seen->second > config_.sessionIdleMs) {
    sessionSeen_.erase(seen);
    *expiredSessionId = out.tokenId;
    out.principal.reset();
    out.error = Status::Unauthenticated("session expired or ended; log in again");
    return out;
  }
  if (csrfToken && !isSafeMethod(req.method()) &&
      !auth::csrfTokenMatches(out.secret, req[kCsrfHeader])) {
    out.principal.reset();
    out.error = Status::PermissionDenied(std::string(kCsrfHeader) +
                                         ": missing or wrong; a console session's writes must "
                                         "carry the csrf_token its login returned");
    return out;
  }
  seen->second = now;
  return out;
}

bool LoginService::stillValid(const std::string& secret, bool viaCookie,
                              const control::Cluster& cluster) const {
  auto principal = cluster.access().authenticate(secret);
  if (!principal || principal->kind == control::Principal::Kind::kHost) return false;
  const std::string tokenId = secret.substr(0, secret.find('_'));
  auto tok = cluster.world().tokens.find(tokenId);
  const bool isSession =
      tok != cluster.world().tokens.end() && tok->second.kind == model::TokenKind::kSession;
  if (isSession != viaCookie) return false;
  if (!viaCookie) return true;
  // Read, never touched: only requests the user makes keep a session alive.
  auto seen = sessionSeen_.find(tokenId);
  return seen != sessionSeen_.end() && clock_.nowMs() - seen->second <= config_.sessionIdleMs;
}

int64_t LoginService::retryAfterSeconds(const std::string& user, const std::string& address) const {
  const TimeMs now = clock_.nowMs();
  TimeMs wait = std::max(limiters_->account.retryAfterMs(user, now),
                         limiters_->address.retryAfterMs(clientKey(address), now));
  return (wait + 999) / 1000;
}

std::unique_ptr<LoginAttempt> LoginService::beginAttempt(const std::string& user,
                                                         const std::string& address) {
  return std::make_unique<LoginAttempt>(limiters_, user, clientKey(address));
}

void LoginService::loginFailed(const std::string& user, const std::string& address) {
  const TimeMs now = clock_.nowMs();
  limiters_->account.recordFailure(user, now);
  limiters_->address.recordFailure(clientKey(address), now);
}

void LoginService::loginFailedFrom(const std::string& address) {
  limiters_->address.recordFailure(clientKey(address), clock_.nowMs());
}

LoginAttempt::LoginAttempt(std::shared_ptr<LoginLimiters> limiters, std::string account,
                           std::string client)
    : limiters_(std::move(limiters)), account_(std::move(account)), client_(std::move(client)) {
  if (!account_.empty()) limiters_->account.beginAttempt(account_);
  limiters_->address.beginAttempt(client_);
}

LoginAttempt::~LoginAttempt() {
  if (!account_.empty()) limiters_->account.endAttempt(account_);
  limiters_->address.endAttempt(client_);
}

std::string LoginService::sessionCookie(const std::string& secret) const {
  return std::string(kSessionCookie) + "=" + secret + "; HttpOnly; SameSite=Strict; Path=/" +
         "; Max-Age=" + std::to_string(config_.sessionLifetimeMs / 1000) +
         (config_.secureCookies ? "; Secure" : "");
}

std::string LoginService::sessionOriginCookie(const std::string& credential, int64_t id) const {
  return std::string(kOriginCookie) + "=" + credential +
         "; HttpOnly; SameSite=Lax; Path=/sessions/" + std::to_string(id) +
         "/; Max-Age=" + std::to_string(config_.sessionLifetimeMs / 1000) +
         (config_.secureCookies ? "; Secure" : "");
}

std::string LoginService::clearedSessionCookie() const {
  return std::string(kSessionCookie) + "=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0" +
         (config_.secureCookies ? "; Secure" : "");
}

std::vector<std::string_view> cookieValues(std::string_view header, std::string_view name) {
  std::vector<std::string_view> out;
  while (!header.empty()) {
    auto semi = header.find(';');
    std::string_view part = header.substr(0, semi);
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    auto eq = part.find('=');
    if (eq != std::string_view::npos && part.substr(0, eq) == name)
      out.push_back(part.substr(eq + 1));
  }
  return out;
}

std::string uniqueCookie(std::string_view header, std::string_view name) {
  const auto values = cookieValues(header, name);
  return values.size() == 1 ? std::string(values.front()) : std::string();
}

std::string bearerTokenOf(const HttpRequest& req) {
  auto auth = req[http::field::authorization];
  if (auth.size() > 7 && (auth.substr(0, 7) == "Bearer " || auth.substr(0, 7) == "bearer "))
    return std::string(auth.substr(7));
  return "";
}

std::string sessionSecretOf(const HttpRequest& req) {
  return uniqueCookie(req[http::field::cookie], kSessionCookie);
}

ApiResponse unavailableResponse(const Status& st) {
  ApiResponse res = ApiResponse::error(st);
  res.headers.emplace_back("Retry-After", "1");
  return res;
}

}  // namespace allot::api
