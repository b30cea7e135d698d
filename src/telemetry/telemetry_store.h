#pragma once
// TelemetryStore: GPU samples and their rollups, and each allocation's usage over time, behind
// an interface like store::Store's, so that another engine can implement both (the one engine
// today: SqliteTelemetryStore, telemetry/sqlite_telemetry_store.h, on telemetry.db).
//
// What it keeps, each with its own retention:
//   gpu_samples             raw readings                       (default 24 hours)
//   gpu_minutes, gpu_hours  each GPU's readings folded         (default 30 days, 2 years)
//   usage_minutes, _hours   each allocation's UsageCell        (default 30 days, 2 years)
//   usage_totals            each allocation's UsageCell, whole (kept as long as the ledger)
// The ledger index holds the totals in memory, so a report needs the tiers only for allocations
// that a window cuts: see usageWithin.
//
// Threads: submit(), usageWithin() and gpuHistory() are called from allotd's I/O thread; an
// engine commits in the background. A batch handed to submit stays visible to usageWithin until
// it is committed, so a report never misses or double-counts it.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "telemetry/attribution.h"
#include "telemetry/usage_cell.h"

namespace allot::telemetry {

struct TelemetryRetention {
  int64_t rawMs = 24 * kHourMs;
  int64_t minutesMs = 30 * 24 * kHourMs;
  int64_t hoursMs = 730 * 24 * kHourMs;
};

enum class Resolution { kRaw, kMinute, kHour };

// One point of a GPU's history: a raw sample (samples = 1) or a minute or hour folded.
struct GpuPoint {
  TimeMs at = 0;  // the sample's time, or the bucket's start
  int64_t samples = 0;
  std::optional<double> utilizationPct;  // mean; absent when no sample carried one
  std::optional<int64_t> memoryMaxMib;
  std::optional<double> temperatureMaxC;
  std::optional<double> powerW;  // mean
};

class TelemetryStore {
 public:
  // Opens (creating if needed) the SQLite engine's database at `path`. `clock` dates retention.
  static Result<std::unique_ptr<TelemetryStore>> open(const std::string& path,
                                                      TelemetryRetention retention,
                                                      const Clock& clock);
  virtual ~TelemetryStore() = default;  // an engine commits what was submitted first

  // Every allocation's usage so far, read once at start.
  virtual Result<std::vector<std::pair<int64_t, UsageCell>>> loadTotals() = 0;

  // Queues a batch; the engine commits it within about a second. Never blocks on disk.
  virtual void submit(TelemetryBatch batch) = 0;
  // Returns once everything submitted so far is committed (tests, benchmarks, shutdown).
  virtual void flush() = 0;

  // The usage of allocation `alloc` within [from, to): whole hours from the hour tier, the rest
  // from the minute tier (or, where minutes have expired, the hour tier), buckets that the window
  // cuts prorated. nullopt when part of the window is older than the hour tier keeps.
  virtual std::optional<UsageCell> usageWithin(int64_t alloc, TimeMs from, TimeMs to) = 0;

  // One GPU's points within [from, to), oldest first, at most `limit` of them.
  virtual Result<std::vector<GpuPoint>> gpuHistory(const std::string& host, int gpu, TimeMs from,
                                                   TimeMs to, Resolution resolution,
                                                   size_t limit) = 0;

  // Deletes what each tier no longer keeps, and waits for it. An engine also does this by itself
  // every hour.
  virtual Status applyRetention() = 0;

  virtual uint64_t samplesCommitted() const = 0;
  virtual const std::string& path() const = 0;
};

}  // namespace allot::telemetry
