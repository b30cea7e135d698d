#include "telemetry/attribution.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace allot::telemetry {
namespace {

// A hold that ended this long before a GPU's newest sample can no longer receive one.
constexpr int64_t kKeepEndedHoldsMs = 10 * kMinuteMs;
// Without a previous sample close enough, a sample is taken to cover one interval.
constexpr int64_t kMaxSpanIntervals = 3;
constexpr int64_t kDefaultIntervalMs = 5'000;

}  // namespace

void UsageAttributor::onLedger(const model::LedgerEntry& e) {
  if (e.kind == model::LedgerKind::kOpen) {
    auto& keys = allocGpus_[e.seq];
    for (int index : e.gpuIndices) {
      GpuKey key{e.host, index};
      gpus_[key].holds.push_back({e.seq, e.gpuMilli, e.startAt, 0});
      keys.push_back(std::move(key));
    }
    return;
  }
  auto it = allocGpus_.find(e.ref);
  if (it == allocGpus_.end()) return;
  for (const auto& key : it->second) {
    for (Hold& h : gpus_[key].holds) {
      if (h.alloc == e.ref) h.end = std::max(e.endAt, h.start);
    }
  }
  // Kept after a close: a correction may still move the end.
}

void UsageAttributor::attribute(GpuState& gpu, TimeMs from, TimeMs to, double utilPct,
                                const std::function<void(int64_t, const UsageCell&)>& onUsage) {
  const bool idle = utilPct < idleBelowPct_;
  for (const Hold& h : gpu.holds) {
    const TimeMs s = std::max(from, h.start);
    const TimeMs e = h.end == 0 ? to : std::min(to, h.end);
    for (TimeMs p = s; p < e;) {
      const TimeMs minute = bucketOf(p, kMinuteMs);
      const TimeMs q = std::min(e, minute + kMinuteMs);
      const int64_t amount = (q - p) * h.gpuMilli;
      const UsageCell c{amount, std::llround(static_cast<double>(amount) * utilPct / 100.0),
                        idle ? amount : 0};
      pending_[h.alloc][minute] += c;
      if (onUsage) onUsage(h.alloc, c);
      p = q;
    }
  }
}

void UsageAttributor::addRound(const std::string& host, const model::Telemetry& round, TimeMs now,
                               const std::function<void(int64_t, const UsageCell&)>& onUsage) {
  const int64_t interval = round.intervalMs > 0 ? round.intervalMs : kDefaultIntervalMs;
  const TimeMs minute = bucketOf(now, kMinuteMs);
  for (const auto& s : round.gpus) {
    GpuState& gpu = gpus_[{host, s.index}];
    int64_t span = interval;
    if (gpu.lastAgentAt != 0) {
      const int64_t since = round.at - gpu.lastAgentAt;
      // Nothing new on the agent's clock: a round sent twice (skip it), or the agent's clock
      // stepped back, as after a restart with a different clock (take one interval).
      if (since <= 0 && now - gpu.lastReceivedAt < interval / 2) continue;
      if (since > 0 && since <= kMaxSpanIntervals * interval) span = since;
    }
    raw_.push_back({host, now, s});

    GpuMinute& m = minutes_[{host, s.index, minute}];
    if (m.samples == 0) {
      m.host = host;
      m.gpu = s.index;
      m.minute = minute;
    }
    ++m.samples;
    if (s.utilizationPct) {
      ++m.utilSamples;
      m.utilSum += *s.utilizationPct;
    }
    if (s.memoryUsedMib) m.memoryMaxMib = std::max(m.memoryMaxMib, *s.memoryUsedMib);
    if (s.temperatureC) m.temperatureMaxC = std::max(m.temperatureMaxC, *s.temperatureC);
    if (s.powerW) {
      m.powerSumW += *s.powerW;
      ++m.powerSamples;
    }

    gpu.lastAgentAt = round.at;
    gpu.lastReceivedAt = now;
    std::erase_if(gpu.holds, [&](const Hold& h) {
      const bool gone = h.end != 0 && h.end < now - kKeepEndedHoldsMs;
      if (gone) allocGpus_.erase(h.alloc);  // all its GPUs' holds ended together
      return gone;
    });
    if (s.utilizationPct) attribute(gpu, now - span, now, *s.utilizationPct, onUsage);
  }
}

TelemetryBatch UsageAttributor::drain() {
  TelemetryBatch b;
  b.samples = std::move(raw_);
  raw_.clear();
  for (auto& [alloc, byMinute] : pending_) {
    for (auto& [minute, cell] : byMinute) b.usage.push_back({alloc, minute, cell});
  }
  pending_.clear();
  for (auto& [key, m] : minutes_) b.gpuMinutes.push_back(std::move(m));
  minutes_.clear();
  return b;
}

UsageCell UsageAttributor::pendingWithin(int64_t alloc, TimeMs from, TimeMs to) const {
  UsageCell sum;
  auto it = pending_.find(alloc);
  if (it == pending_.end()) return sum;
  for (const auto& [minute, cell] : it->second) {
    const TimeMs s = std::max(from, minute);
    const TimeMs e = std::min(to, minute + kMinuteMs);
    if (e <= s) continue;
    sum += e - s == kMinuteMs ? cell : cell.scaled(e - s, kMinuteMs);
  }
  return sum;
}

}  // namespace allot::telemetry
