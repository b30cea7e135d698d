#include "auth/password.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>

#include "auth/worker_pool.h"
#include "common/secrets.h"

namespace allot::auth {
namespace {

class PasswordTest : public ::testing::Test {
 protected:
  void SetUp() override { initSecrets(); }
};

TEST_F(PasswordTest, HashVerifiesItsPasswordOnly) {
  auto hash = hashPassword("correct horse battery", PasswordCost::minimum());
  ASSERT_TRUE(hash.ok()) << hash.status().toString();
  EXPECT_EQ(hash->rfind("$argon2id$", 0), 0u);
  EXPECT_TRUE(verifyPassword(*hash, "correct horse battery"));
  EXPECT_FALSE(verifyPassword(*hash, "correct horse batterx"));
  EXPECT_FALSE(verifyPassword(*hash, ""));
}

TEST_F(PasswordTest, SaltedSoTwoHashesOfOnePasswordDiffer) {
  auto a = hashPassword("same password here", PasswordCost::minimum());
  auto b = hashPassword("same password here", PasswordCost::minimum());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
}

TEST_F(PasswordTest, MalformedOrEmptyHashNeverVerifies) {
  EXPECT_FALSE(verifyPassword("", "anything at all"));
  EXPECT_FALSE(verifyPassword("$argon2id$garbage", "anything at all"));
}

TEST_F(PasswordTest, PolicyNamesTheFieldAndTheBound) {
  Status tooShort = checkPasswordPolicy("short", "password");
  EXPECT_EQ(tooShort.code(), Code::kInvalidArgument);
  EXPECT_NE(tooShort.message().find("at least 10"), std::string::npos);
  EXPECT_NE(tooShort.message().find("password"), std::string::npos);
  EXPECT_EQ(checkPasswordPolicy(std::string(kMaxPasswordBytes + 1, 'x'), "password").code(),
            Code::kInvalidArgument);
  EXPECT_EQ(checkPasswordPolicy(std::string("abcdefghij\0k", 12), "password").code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(checkPasswordPolicy("ten chars!", "password").ok());
  EXPECT_TRUE(checkPasswordPolicy(std::string(kMaxPasswordBytes, 'x'), "password").ok());
}

TEST(WorkerPoolTest, RunsWorkOffTheCallingThread) {
  WorkerPool pool(2, 4);
  std::promise<std::thread::id> ran;
  ASSERT_TRUE(pool.trySubmit([&] { ran.set_value(std::this_thread::get_id()); }));
  EXPECT_NE(ran.get_future().get(), std::this_thread::get_id());
}

// A saturated pool refuses at once (allotd turns that into 503 + Retry-After) instead of
// queueing without bound; once work drains, it accepts again.
TEST(WorkerPoolTest, FullQueueRefusesAndRecovers) {
  WorkerPool pool(1, 2);
  std::latch release(1);
  std::promise<void> started;
  std::atomic<int> done{0};
  ASSERT_TRUE(pool.trySubmit([&] {
    started.set_value();
    release.wait();
    ++done;
  }));
  started.get_future().wait();  // the worker is busy; the queue is empty
  ASSERT_TRUE(pool.trySubmit([&] { ++done; }));
  ASSERT_TRUE(pool.trySubmit([&] { ++done; }));
  EXPECT_FALSE(pool.trySubmit([&] { ++done; }));  // two waiting: full
  release.count_down();
  std::promise<void> last;
  // Retried until the queue has room again: bounded by the two quick items ahead.
  while (!pool.trySubmit([&] { last.set_value(); })) std::this_thread::yield();
  last.get_future().wait();
  EXPECT_EQ(done.load(), 3);
}

}  // namespace
}  // namespace allot::auth
