#pragma once
// UsageCell: how an allocation's GPUs were used over some span, as utilisation samples tell it.
// Units are milli-GPU-milliseconds, like the ledger's allocated figure, so that a report adds
// and divides them without converting: one whole GPU held for one second is 1,000,000.

#include <cstdint>

namespace allot::telemetry {

struct UsageCell {
  int64_t measured = 0;  // allocated time that samples covered
  int64_t used = 0;      // the same, weighted by utilisation (100% counts in full)
  int64_t idle = 0;      // the part whose samples were under the idle threshold

  UsageCell& operator+=(const UsageCell& o) {
    measured += o.measured;
    used += o.used;
    idle += o.idle;
    return *this;
  }
  bool empty() const { return measured == 0 && used == 0 && idle == 0; }
  // This cell scaled by num/den (den > 0), for a bucket only partly inside a window.
  UsageCell scaled(int64_t num, int64_t den) const {
    auto s = [&](int64_t v) { return static_cast<int64_t>(static_cast<__int128>(v) * num / den); };
    return {s(measured), s(used), s(idle)};
  }
};

constexpr int64_t kMinuteMs = 60'000;
constexpr int64_t kHourMs = 3'600'000;

// The start of the bucket of `size` ms holding `t` (floor, also for times before 1970).
constexpr int64_t bucketOf(int64_t t, int64_t size) {
  return t >= 0 ? t - t % size : t - ((t % size) + size) % size;
}

}  // namespace allot::telemetry
