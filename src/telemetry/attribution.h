#pragma once
// UsageAttributor: turns GPU samples into usage of the allocations that held the GPUs when the
// samples were taken, fractions included. It learns who holds what from the allocation ledger's
// entries, so attribution agrees with the allocated figure by construction.
//
// Time: a sample is placed on allotd's clock (when it arrived), and covers the span since the
// GPU's previous sample as the agent's clock measured it. Positions then agree with the ledger,
// which allotd's clock also writes, whatever the agent's clock says; only lengths come from the
// agent.
//
// Everything attributed waits here, per minute, until drained into a TelemetryBatch for the
// store. Not thread-safe: allotd's I/O thread owns it, beside World.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "model/agent_protocol.h"
#include "model/model.h"
#include "telemetry/usage_cell.h"

namespace allot::telemetry {

// One reading as the store keeps it for its short raw window.
struct RawSample {
  std::string host;
  TimeMs at = 0;  // allotd's clock
  model::GpuSample sample;
};

// Usage of one allocation (its ledger entry's seq) in one minute.
struct UsageDelta {
  int64_t alloc = 0;
  TimeMs minute = 0;
  UsageCell cell;
};

// One GPU's readings folded over one minute, whoever held it.
struct GpuMinute {
  std::string host;
  int gpu = 0;
  TimeMs minute = 0;
  int64_t samples = 0;
  int64_t utilSamples = 0;  // samples that carried a utilisation
  double utilSum = 0;       // percent
  int64_t memoryMaxMib = 0;
  double temperatureMaxC = 0;
  double powerSumW = 0;
  int64_t powerSamples = 0;
};

struct TelemetryBatch {
  std::vector<RawSample> samples;
  std::vector<UsageDelta> usage;
  std::vector<GpuMinute> gpuMinutes;
  bool empty() const { return samples.empty() && usage.empty() && gpuMinutes.empty(); }
};

class UsageAttributor {
 public:
  // Samples under `idleBelowPct` count as idle time of their holders.
  explicit UsageAttributor(double idleBelowPct) : idleBelowPct_(idleBelowPct) {}

  // Opens start holds, closes and corrections end them (the last word wins).
  void onLedger(const model::LedgerEntry& e);

  // A sample round of `host`, received at `now`. `onUsage` hears each allocation's share as it
  // is attributed (the ledger index keeps running totals from it).
  void addRound(const std::string& host, const model::Telemetry& round, TimeMs now,
                const std::function<void(int64_t alloc, const UsageCell&)>& onUsage);

  // Everything attributed since the last drain.
  TelemetryBatch drain();
  // The undrained usage of `alloc` within [from, to), partial minutes prorated.
  UsageCell pendingWithin(int64_t alloc, TimeMs from, TimeMs to) const;

  double idleBelowPct() const { return idleBelowPct_; }

 private:
  using GpuKey = std::pair<std::string, int>;
  struct Hold {
    int64_t alloc = 0;
    int64_t gpuMilli = 1000;
    TimeMs start = 0;
    TimeMs end = 0;  // 0 while held
  };
  struct GpuState {
    std::vector<Hold> holds;
    TimeMs lastAgentAt = 0;
    TimeMs lastReceivedAt = 0;
  };
  void attribute(GpuState& gpu, TimeMs from, TimeMs to, double utilPct,
                 const std::function<void(int64_t, const UsageCell&)>& onUsage);

  double idleBelowPct_;
  std::map<GpuKey, GpuState> gpus_;
  std::unordered_map<int64_t, std::vector<GpuKey>> allocGpus_;  // open allocations' GPUs
  std::unordered_map<int64_t, std::map<TimeMs, UsageCell>> pending_;
  std::map<std::tuple<std::string, int, TimeMs>, GpuMinute> minutes_;
  std::vector<RawSample> raw_;
};

}  // namespace allot::telemetry
