#pragma once
// FailureLimiter: counts login failures per key (an account name, or a client address) in a
// sliding window. Once a key has `maxFailures` failures within `window`, it is blocked until
// the oldest of them leaves the window; callers answer 429 with that wait as Retry-After, and
// do not even check the password meanwhile. Successes are never slowed: a caller that succeeds
// clears its key. Pure: time is an input. Kept in memory (a restart forgets), bounded by
// `maxKeys`: past it, keys with no failure inside the window are dropped first, then the
// stalest. Not thread-safe: allotd calls it on its I/O thread.
//
// Attempts under way count as failures until they end (beginAttempt, endAttempt): a check takes
// a password hash's time, and guesses sent at once would otherwise all pass retryAfterMs before
// the first of them failed (about 34 at once against a limit of 5, with allotd's hashing pool).

#include <cstddef>
#include <deque>
#include <map>
#include <string>

#include "common/clock.h"

namespace allot::auth {

struct FailureLimit {
  int maxFailures = 5;
  TimeMs windowMs = 15 * 60 * 1000;
};

class FailureLimiter {
 public:
  explicit FailureLimiter(FailureLimit limit, size_t maxKeys = 100000)
      : limit_(limit), maxKeys_(maxKeys) {}

  // Milliseconds until `key` may try again; 0 when it may now. When only attempts under way
  // block it, kRetryAfterAttemptsMs: they end within a password check.
  TimeMs retryAfterMs(const std::string& key, TimeMs now) const;
  void recordFailure(const std::string& key, TimeMs now);
  void recordSuccess(const std::string& key) { failures_.erase(key); }
  size_t trackedKeys() const { return failures_.size(); }

  void beginAttempt(const std::string& key) { ++attempts_[key]; }
  void endAttempt(const std::string& key);

  static constexpr TimeMs kRetryAfterAttemptsMs = 1000;

 private:
  void forgetOld(TimeMs now);

  FailureLimit limit_;
  size_t maxKeys_;
  std::map<std::string, std::deque<TimeMs>> failures_;  // key -> failure times, oldest first
  // key -> attempts under way; bounded by the requests in flight, and erased at zero.
  std::map<std::string, int> attempts_;
};

}  // namespace allot::auth
