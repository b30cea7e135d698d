#pragma once
// SqliteTelemetryStore: the TelemetryStore on its own SQLite file (telemetry.db beside the
// store). Kept apart from the store because its load is different: many small writes a second,
// none of which anyone waits on, and losing the last second of readings in a power cut costs
// nothing that matters. So it commits in the background without fsync on every commit (WAL,
// synchronous=NORMAL), while the store fsyncs every batch.
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
#include "telemetry/telemetry_store.h"

namespace allot::telemetry {

class SqliteTelemetryStore final : public TelemetryStore {
 public:
  // Opens (creating if needed) the database at `path`. `clock` dates retention.
  static Result<std::unique_ptr<SqliteTelemetryStore>> open(const std::string& path,
                                                            TelemetryRetention retention,
                                                            const Clock& clock);
  ~SqliteTelemetryStore() override;  // commits what was submitted, then stops the writer

  SqliteTelemetryStore(const SqliteTelemetryStore&) = delete;
  SqliteTelemetryStore& operator=(const SqliteTelemetryStore&) = delete;

  // TelemetryStore
  Result<std::vector<std::pair<int64_t, UsageCell>>> loadTotals() override;
  void submit(TelemetryBatch batch) override;
  void flush() override;
  std::optional<UsageCell> usageWithin(int64_t alloc, TimeMs from, TimeMs to) override;
  Result<std::vector<GpuPoint>> gpuHistory(const std::string& host, int gpu, TimeMs from, TimeMs to,
                                           Resolution resolution, size_t limit) override;
  Status applyRetention() override;
  uint64_t samplesCommitted() const override;
  const std::string& path() const override { return path_; }

 private:
  struct Statements;
  SqliteTelemetryStore(std::string path, TelemetryRetention retention, const Clock& clock,
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
