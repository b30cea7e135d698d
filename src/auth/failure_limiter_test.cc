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

// Attack: guesses sent at once. Each is checked for as long as a password hash takes, so the
// limit must count them while they are checked, not only once they have failed.
TEST(FailureLimiterTest, AttemptsUnderWayCountUntilTheyEnd) {
  FailureLimiter lim({3, 10 * kMin});
  lim.recordFailure("alice", 0);
  lim.beginAttempt("alice");
  EXPECT_EQ(lim.retryAfterMs("alice", 1), 0);
  lim.beginAttempt("alice");
  // One failure and two under way: a third now could be the limit's fourth.
  EXPECT_EQ(lim.retryAfterMs("alice", 1), FailureLimiter::kRetryAfterAttemptsMs);
  EXPECT_EQ(lim.retryAfterMs("bob", 1), 0);
  // One fails, one ends otherwise (the directory did not answer): two failures, room for one.
  lim.recordFailure("alice", 2);
  lim.endAttempt("alice");
  lim.endAttempt("alice");
  EXPECT_EQ(lim.retryAfterMs("alice", 3), 0);
  // With the failures at the limit, the wait is theirs, not an attempt's.
  lim.recordFailure("alice", 4);
  lim.beginAttempt("alice");
  EXPECT_EQ(lim.retryAfterMs("alice", 4), 10 * kMin - 4);  // the first failure, at 0, leaves
  lim.endAttempt("alice");
  // A key with attempts and no failures yet.
  for (int i = 0; i < 3; ++i) lim.beginAttempt("carol");
  EXPECT_EQ(lim.retryAfterMs("carol", 5), FailureLimiter::kRetryAfterAttemptsMs);
  for (int i = 0; i < 3; ++i) lim.endAttempt("carol");
  EXPECT_EQ(lim.retryAfterMs("carol", 5), 0);
  lim.endAttempt("carol");  // one end too many changes nothing
  EXPECT_EQ(lim.retryAfterMs("carol", 5), 0);
}

}  // namespace
}  // namespace allot::auth
