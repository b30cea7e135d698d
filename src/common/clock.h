#pragma once
// Clock: the one seam for time. Production code asks a Clock; tests pass a FakeClock. Times are
// Unix milliseconds (int64) everywhere inside Allot; the API shows them as ISO 8601 UTC.

#include <atomic>
#include <cstdint>

namespace allot {

using TimeMs = int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimeMs nowMs() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimeMs nowMs() const override;
};

// A clock that moves only when told to. Safe to read from any thread.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimeMs start = 1'700'000'000'000) : now_(start) {}
  TimeMs nowMs() const override { return now_.load(); }
  void advance(TimeMs ms) { now_ += ms; }
  void set(TimeMs ms) { now_ = ms; }

 private:
  std::atomic<TimeMs> now_;
};

}  // namespace allot
