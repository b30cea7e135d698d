#include "auth/failure_limiter.h"

#include <gtest/gtest.h>

namespace allot::auth {
namespace {

constexpr TimeMs kMin = 60 * 1000;

TEST(FailureLimiterTest, BlocksAfterMaxFailuresWithinTheWindow) {
  FailureLimiter lim({3, 10 * kMin});
  lim.recordFailure("alice", 0);
  lim.recordFailure("alice", 1 * kMin);
  EXPECT_EQ(lim.retryAfterMs("alice", 1 * kMin), 0);
  lim.recordFailure("alice", 2 * kMin);
  // Blocked until the first failure leaves the window.
  EXPECT_EQ(lim.retryAfterMs("alice", 2 * kMin), 8 * kMin);
  EXPECT_EQ(lim.retryAfterMs("alice", 9 * kMin), 1 * kMin);
  EXPECT_EQ(lim.retryAfterMs("alice", 10 * kMin), 0);
  // Other keys are not affected.
  EXPECT_EQ(lim.retryAfterMs("bob", 2 * kMin), 0);
}

TEST(FailureLimiterTest, FailuresSpreadBeyondTheWindowNeverBlock) {
  FailureLimiter lim({3, 10 * kMin});
  for (int i = 0; i < 20; ++i) {
    lim.recordFailure("10.0.0.1", i * 6 * kMin);
    EXPECT_EQ(lim.retryAfterMs("10.0.0.1", i * 6 * kMin), 0) << i;
  }
}

TEST(FailureLimiterTest, SuccessClearsTheKey) {
  FailureLimiter lim({2, 10 * kMin});
  lim.recordFailure("alice", 0);
  lim.recordSuccess("alice");
  lim.recordFailure("alice", 1);
  EXPECT_EQ(lim.retryAfterMs("alice", 1), 0);
}

TEST(FailureLimiterTest, MemoryIsBoundedByMaxKeys) {
  FailureLimiter lim({2, 10 * kMin}, 100);
  for (int i = 0; i < 1000; ++i) lim.recordFailure("addr-" + std::to_string(i), i);
  EXPECT_LE(lim.trackedKeys(), 100u);
  // The newest keys are kept.
  lim.recordFailure("addr-999", 1000);
  EXPECT_GT(lim.retryAfterMs("addr-999", 1000), 0);
}

}  // namespace
}  // namespace allot::auth
