#pragma once
// TelemetryStore: GPU samples and their rollups, in their own SQLite file (telemetry.db beside
// the store). Kept apart from the store because its load is different: many small writes a
// second, none of which anyone waits on, and losing the last second of readings in a power cut
// costs nothing that matters. So it commits in the background without fsync on every commit
// (WAL, synchronous=NORMAL), while the store fsyncs every batch.
//
// What it keeps, each with its own retention:
//   gpu_samples             raw readings                       (default 24 hours)
//   gpu_minutes, gpu_hours  each GPU's readings folded         (default 30 days, 2 years)
//   usage_minutes, _hours   each allocation's UsageCell        (default 30 days, 2 years)
//   usage_totals            each allocation's UsageCell, whole (kept as long as the ledger)
// The ledger index holds the totals in memory, so a report needs the tiers only for allocations
// that a window cuts: see usageWithin.
//
// Threads: submit() and usageWithin() are called from allotd's I/O thread; one writer thread
// owns the write connection. A batch handed to submit stays visible to usageWithin (from memory)
// until the writer has committed it, so a report never misses or double-counts it.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "store/sqlite/sqlite_handle.h"
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
  // Opens (creating if needed) the database at `path`. `clock` dates retention.
  static Result<std::unique_ptr<TelemetryStore>> open(const std::string& path,
                                                      TelemetryRetention retention,
                                                      const Clock& clock);
  ~TelemetryStore();  // commits what was submitted, then stops the writer

  TelemetryStore(const TelemetryStore&) = delete;
  TelemetryStore& operator=(const TelemetryStore&) = delete;

  // Every allocation's usage so far, read once at start.
  Result<std::vector<std::pair<int64_t, UsageCell>>> loadTotals();

  // Queues a batch; the writer commits within about a second. Never blocks on disk.
  void submit(TelemetryBatch batch);
  // Returns once everything submitted so far is committed (tests, benchmarks, shutdown).
  void flush();

  // The usage of allocation `alloc` within [from, to): whole hours from the hour tier, the rest
  // from the minute tier (or, where minutes have expired, the hour tier), buckets that the window
  // cuts prorated. nullopt when part of the window is older than the hour tier keeps.
  std::optional<UsageCell> usageWithin(int64_t alloc, TimeMs from, TimeMs to);

  // One GPU's points within [from, to), oldest first, at most `limit` of them.
  Result<std::vector<GpuPoint>> gpuHistory(const std::string& host, int gpu, TimeMs from, TimeMs to,
                                           Resolution resolution, size_t limit);

  // Deletes what each tier no longer keeps, on the writer thread, and waits for it. The writer
  // also does this by itself every hour.
  Status applyRetention();

  uint64_t samplesCommitted() const;
  const std::string& path() const { return path_; }

 private:
  struct Statements;
  TelemetryStore(std::string path, TelemetryRetention retention, const Clock& clock,
                 store::sqlite::DbHandle writeDb, std::unique_ptr<Statements> statements,
                 store::sqlite::DbHandle readDb);
  void writerLoop();
  Status write(const std::vector<TelemetryBatch>& batches);
  Status retain();
  // Sums one tier's rows of `alloc` within [from, to), prorating rows the window cuts.
  UsageCell sumTier(bool hours, int64_t alloc, TimeMs from, TimeMs to);
  UsageCell sumFinest(int64_t alloc, TimeMs from, TimeMs to);

  const std::string path_;
  const TelemetryRetention retention_;
  const Clock& clock_;

  // Writer thread only.
  store::sqlite::DbHandle writeDb_;
  std::unique_ptr<Statements> statements_;
  TimeMs retainedAt_ = 0;

  // Guards the read connection, the overlay and the moment of COMMIT (see the header comment).
  std::mutex readMu_;
  store::sqlite::DbHandle readDb_;
  store::sqlite::StmtHandle sumMinutes_, sumHours_;
  // Submitted but not yet committed usage: alloc -> minute -> cell.
  std::unordered_map<int64_t, std::map<TimeMs, UsageCell>> overlay_;

  mutable std::mutex mu_;
  std::condition_variable wake_, drained_;
  std::vector<TelemetryBatch> queue_;
  uint64_t submitted_ = 0, committed_ = 0;  // batches
  uint64_t samplesCommitted_ = 0;
  uint64_t retainAsked_ = 0, retainDone_ = 0;
  Status retainStatus_;
  bool stopping_ = false;
  std::thread writer_;
};

}  // namespace allot::telemetry
