#include "auth/failure_limiter.h"

#include <algorithm>

namespace allot::auth {

TimeMs FailureLimiter::retryAfterMs(const std::string& key, TimeMs now) const {
  auto pending = attempts_.find(key);
  const int underWay = pending == attempts_.end() ? 0 : pending->second;
  auto it = failures_.find(key);
  if (it == failures_.end()) return underWay < limit_.maxFailures ? 0 : kRetryAfterAttemptsMs;
  const auto& times = it->second;
  // Failures still inside the window, newest last.
  auto firstInWindow = std::upper_bound(times.begin(), times.end(), now - limit_.windowMs);
  auto inWindow = std::distance(firstInWindow, times.end());
  if (inWindow + underWay < limit_.maxFailures) return 0;
  if (inWindow < limit_.maxFailures) return kRetryAfterAttemptsMs;
  // Blocked until enough of them age out that fewer than maxFailures remain.
  TimeMs freedAt = *(times.end() - limit_.maxFailures) + limit_.windowMs;
  return std::max<TimeMs>(1, freedAt - now);
}

void FailureLimiter::recordFailure(const std::string& key, TimeMs now) {
  if (failures_.size() >= maxKeys_ && !failures_.count(key)) forgetOld(now);
  auto& times = failures_[key];
  times.push_back(now);
  while (!times.empty() && times.front() <= now - limit_.windowMs) times.pop_front();
  // Only the newest maxFailures matter for the decision.
  while (times.size() > static_cast<size_t>(limit_.maxFailures)) times.pop_front();
}

void FailureLimiter::endAttempt(const std::string& key) {
  auto it = attempts_.find(key);
  if (it != attempts_.end() && --it->second <= 0) attempts_.erase(it);
}

void FailureLimiter::forgetOld(TimeMs now) {
  for (auto it = failures_.begin(); it != failures_.end();) {
    if (it->second.empty() || it->second.back() <= now - limit_.windowMs) {
      it = failures_.erase(it);
    } else {
      ++it;
    }
  }
  while (failures_.size() >= maxKeys_) {
    auto stalest = std::min_element(failures_.begin(), failures_.end(), [](auto& a, auto& b) {
      return a.second.back() < b.second.back();
    });
    failures_.erase(stalest);
  }
}

}  // namespace allot::auth
