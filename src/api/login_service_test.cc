#include "api/login_service.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <future>
#include <latch>

#include "common/secrets.h"

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

}  // namespace
}  // namespace allot::api
