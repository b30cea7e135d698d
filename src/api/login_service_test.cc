#include "api/login_service.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <future>
#include <latch>

#include "common/secrets.h"
#include "control/log_store.h"

namespace allot::api {
namespace {

namespace asio = boost::asio;

template <typename T>
Result<T> runOn(asio::io_context& io, asio::awaitable<Result<T>> op) {
  std::optional<Result<T>> out;
  auto run = [&]() -> asio::awaitable<void> { out.emplace(co_await std::move(op)); };
  asio::co_spawn(io, run(), asio::detached);
  io.restart();
  io.run();
  return std::move(*out);
}

auth::LoginConfig testConfig() {
  auth::LoginConfig c;
  c.passwordCost = auth::PasswordCost::minimum();
  return c;
}

TEST(LoginServiceTest, HashesAndVerifiesOffTheCallingThread) {
  initSecrets();
  SystemClock clock;
  LoginService login(testConfig(), clock);
  asio::io_context io;
  auto hash = runOn(io, login.hashPassword("a password of mine"));
  ASSERT_TRUE(hash.ok()) << hash.status().toString();
  auto right = runOn(io, login.verifyPassword(*hash, "a password of mine"));
  auto wrong = runOn(io, login.verifyPassword(*hash, "another password"));
  ASSERT_TRUE(right.ok() && wrong.ok());
  EXPECT_TRUE(*right);
  EXPECT_FALSE(*wrong);
}

// A saturated pool answers at once with Unavailable, which the routes send as 503 with
// Retry-After, instead of queueing requests without bound behind the hashing.
TEST(LoginServiceTest, SaturatedPoolIsA503WithRetryAfter) {
  initSecrets();
  SystemClock clock;
  auto pool = std::make_unique<auth::WorkerPool>(1, 1);
  auto* raw = pool.get();
  std::latch release(1);
  std::promise<void> busy;
  ASSERT_TRUE(raw->trySubmit([&] {
    busy.set_value();
    release.wait();
  }));
  busy.get_future().wait();  // the only worker is taken
  std::promise<void> drained;
  ASSERT_TRUE(raw->trySubmit([&] { drained.set_value(); }));  // and the queue is full
  LoginService login(testConfig(), clock, std::move(pool));
  asio::io_context io;
  auto refused = runOn(io, login.hashPassword("a password of mine"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kUnavailable);
  ApiResponse res = unavailableResponse(refused.status());
  EXPECT_EQ(res.status, http::status::service_unavailable);
  ASSERT_EQ(res.headers.size(), 1u);
  EXPECT_EQ(res.headers[0].first, "Retry-After");
  release.count_down();
  drained.get_future().wait();
  // Once the pool drains it serves again.
  auto hash = runOn(io, login.hashPassword("a password of mine"));
  EXPECT_TRUE(hash.ok());
}

// A live stream re-checks its credential without counting as activity: a console left open on
// an idle session still ends when the idle limit passes, and a revoked token fails at once.
TEST(LoginServiceTest, StillValidDoesNotKeepAnIdleSessionAlive) {
  initSecrets();
  FakeClock clock;
  auto dir = std::filesystem::temp_directory_path() / ("allot-login-" + std::to_string(::getpid()));
  control::LogStore logs(dir.string());
  ASSERT_TRUE(logs.init().ok());
  control::Cluster cluster(clock, logs, control::ClusterOptions{});
  auto admin = cluster.access().bootstrapAdmin();
  ASSERT_TRUE(admin.has_value());
  const control::Principal root = *cluster.access().authenticate(admin->value);
  ASSERT_TRUE(cluster.access().createTeam(root, "ml").ok());
  auto alice = cluster.access().createUser(root, "alice", "ml", model::Role::kMember);
  ASSERT_TRUE(alice.ok());
  auto session = cluster.access().issueLoginToken("alice", model::TokenKind::kSession, 0);
  ASSERT_TRUE(session.ok());
  const std::string cookie = session->value.secret;

  auth::LoginConfig config = testConfig();
  LoginService login(config, clock);
  HttpRequest req{http::verb::get, "/api/v1/stream", 11};
  req.set(http::field::cookie, std::string(kSessionCookie) + "=" + cookie);
  std::string idle;
  ASSERT_TRUE(login.authenticate(req, cluster, &idle).principal.has_value());
  EXPECT_TRUE(login.stillValid(cookie, true, cluster));
  EXPECT_FALSE(login.stillValid(cookie, false, cluster)) << "a session is only good as a cookie";
  for (TimeMs step = 0; step < config.sessionIdleMs; step += config.sessionIdleMs / 4) {
    EXPECT_TRUE(login.stillValid(cookie, true, cluster));
    clock.advance(config.sessionIdleMs / 4);
  }
  clock.advance(1);
  EXPECT_FALSE(login.stillValid(cookie, true, cluster));

  const std::string token = alice->value.token;
  EXPECT_TRUE(login.stillValid(token, false, cluster));
  ASSERT_TRUE(cluster.access().revokeToken(root, token.substr(0, token.find('_'))).ok());
  EXPECT_FALSE(login.stillValid(token, false, cluster));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace allot::api
