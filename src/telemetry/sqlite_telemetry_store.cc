#include "telemetry/sqlite_telemetry_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <system_error>

#include "store/sqlite/sqlite_migrate.h"
#include "telemetry/telemetry_schema.h"

namespace allot::telemetry {

namespace sqlite = store::sqlite;
using sqlite::Binder;
using sqlite::StmtHandle;

namespace {

constexpr const char* kGpuRollupUpsert = R"sql(
  (host, gpu, bucket, samples, util_samples, util_sum, memory_max_mib, temperature_max_c,
   power_sum_w, power_samples)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (host, gpu, bucket) DO UPDATE SET
    samples = samples + excluded.samples,
    util_samples = util_samples + excluded.util_samples,
    util_sum = util_sum + excluded.util_sum,
    memory_max_mib = max(memory_max_mib, excluded.memory_max_mib),
    temperature_max_c = max(temperature_max_c, excluded.temperature_max_c),
    power_sum_w = power_sum_w + excluded.power_sum_w,
    power_samples = power_samples + excluded.power_samples)sql";

constexpr const char* kUsageUpsert = R"sql(
  (alloc, bucket, measured, used, idle) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (alloc, bucket) DO UPDATE SET
    measured = measured + excluded.measured,
    used = used + excluded.used,
    idle = idle + excluded.idle)sql";

constexpr const char* kSumUsage = " WHERE alloc = ? AND bucket >= ? AND bucket < ? ORDER BY bucket";

template <typename T>
void bindOptional(Binder& b, const std::optional<T>& v) {
  if (!v) {
    b.null();
  } else if constexpr (std::is_floating_point_v<T>) {
    b.real(*v);
  } else {
    b.integer(*v);
  }
}

}  // namespace

struct SqliteTelemetryStore::Statements {
  StmtHandle insertSample, upsertGpuMinute, upsertGpuHour, upsertUsageMinute, upsertUsageHour,
      upsertTotal;

  static Result<std::unique_ptr<Statements>> prepareAll(sqlite3* db) {
    auto s = std::make_unique<Statements>();
    struct Want {
      StmtHandle* into;
      std::string sql;
    };
    const Want wants[] = {
        {&s->insertSample,
         "INSERT INTO gpu_samples (host, gpu, at_ms, util_pct, memory_mib, temperature_c, power_w,"
         " sm_clock_mhz, ecc_corrected, ecc_uncorrected) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
        {&s->upsertGpuMinute, std::string("INSERT INTO gpu_minutes") + kGpuRollupUpsert},
        {&s->upsertGpuHour, std::string("INSERT INTO gpu_hours") + kGpuRollupUpsert},
        {&s->upsertUsageMinute, std::string("INSERT INTO usage_minutes") + kUsageUpsert},
        {&s->upsertUsageHour, std::string("INSERT INTO usage_hours") + kUsageUpsert},
        {&s->upsertTotal,
         "INSERT INTO usage_totals (alloc, measured, used, idle) VALUES (?, ?, ?, ?)"
         " ON CONFLICT (alloc) DO UPDATE SET measured = measured + excluded.measured,"
         " used = used + excluded.used, idle = idle + excluded.idle"},
    };
    for (const auto& w : wants) {
      auto stmt = sqlite::prepare(db, w.sql, true);
      if (!stmt.ok()) return stmt.status();
      *w.into = std::move(stmt).value();
    }
    return s;
  }
};

Result<std::unique_ptr<SqliteTelemetryStore>> SqliteTelemetryStore::open(
    const std::string& path, TelemetryRetention retention, const Clock& clock) {
  const std::string context = "failed to open telemetry store " + path;
  // NORMAL: a commit survives allotd crashing, not the machine losing power (see the header).
  auto writeDb = sqlite::openWalWriter(path, "NORMAL");
  if (!writeDb.ok()) return writeDb.status().withContext(context);
  sqlite3* db = writeDb->get();
  if (Status st = sqlite::exec(db, "PRAGMA temp_store = MEMORY"); !st.ok())
    return st.withContext(context);
  auto version = sqlite::migrate(db, telemetryMigrations());
  if (!version.ok()) return version.status().withContext(context);
  auto statements = Statements::prepareAll(db);
  if (!statements.ok()) return statements.status().withContext(context);
  auto readDb = sqlite::openConnection(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
  if (!readDb.ok()) return readDb.status().withContext(context + " for reading");
  try {
    return std::unique_ptr<SqliteTelemetryStore>(
        new SqliteTelemetryStore(path, retention, clock, std::move(writeDb).value(),
                                 std::move(statements).value(), std::move(readDb).value()));
  } catch (const std::system_error& e) {
    return Status::Unavailable(context + ": cannot start writer thread: " + e.what());
  }
}

SqliteTelemetryStore::SqliteTelemetryStore(std::string path, TelemetryRetention retention,
                                           const Clock& clock, sqlite::DbHandle writeDb,
                                           std::unique_ptr<Statements> statements,
                                           sqlite::DbHandle readDb)
    : path_(std::move(path)),
      retention_(retention),
      clock_(clock),
      writeDb_(std::move(writeDb)),
      statements_(std::move(statements)),
      readDb_(std::move(readDb)) {
  for (auto [into, table] :
       {std::pair{&sumMinutes_, "usage_minutes"}, {&sumHours_, "usage_hours"}}) {
    auto stmt = sqlite::prepare(
        readDb_.get(), std::string("SELECT bucket, measured, used, idle FROM ") + table + kSumUsage,
        true);
    if (!stmt.ok())
      throw std::system_error(std::make_error_code(std::errc::io_error), stmt.status().message());
    *into = std::move(stmt).value();
  }
  writer_ = std::thread([this] { writerLoop(); });
}

SqliteTelemetryStore::~SqliteTelemetryStore() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  writer_.join();
}

Result<std::vector<std::pair<int64_t, UsageCell>>> SqliteTelemetryStore::loadTotals() {
  std::lock_guard lock(readMu_);
  auto stmt =
      sqlite::prepare(readDb_.get(), "SELECT alloc, measured, used, idle FROM usage_totals");
  if (!stmt.ok()) return stmt.status().withContext("failed to read " + path_);
  std::vector<std::pair<int64_t, UsageCell>> out;
  int rc;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
    sqlite3_stmt* s = stmt->get();
    out.push_back({sqlite::columnInt(s, 0),
                   {sqlite::columnInt(s, 1), sqlite::columnInt(s, 2), sqlite::columnInt(s, 3)}});
  }
  if (rc != SQLITE_DONE) return sqlite::lastError(readDb_.get(), rc, "failed to read " + path_);
  return out;
}

void SqliteTelemetryStore::submit(TelemetryBatch batch) {
  if (batch.empty()) return;
  {
    std::lock_guard lock(readMu_);
    for (const auto& d : batch.usage) overlay_[d.alloc][d.minute] += d.cell;
  }
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(batch));
    ++submitted_;
  }
  wake_.notify_one();
}

void SqliteTelemetryStore::flush() {
  std::unique_lock lock(mu_);
  const uint64_t target = submitted_;
  drained_.wait(lock, [&] { return committed_ >= target; });
}

uint64_t SqliteTelemetryStore::samplesCommitted() const {
  std::lock_guard lock(mu_);
  return samplesCommitted_;
}

void SqliteTelemetryStore::writerLoop() {
  for (;;) {
    std::vector<TelemetryBatch> batches;
    bool stopping;
    {
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, std::chrono::seconds(1),
                     [&] { return stopping_ || !queue_.empty() || retainAsked_ > retainDone_; });
      batches.swap(queue_);
      stopping = stopping_;
    }
    if (!batches.empty()) {
      Status st = write(batches);
      // Telemetry is not worth stopping allotd for: the batch is dropped and said so.
      if (!st.ok())
        spdlog::error("telemetry store: {} batches lost: {}", batches.size(), st.message());
      uint64_t samples = 0;
      for (const auto& b : batches) samples += b.samples.size();
      std::lock_guard lock(mu_);
      committed_ += batches.size();
      samplesCommitted_ += st.ok() ? samples : 0;
      drained_.notify_all();
    }
    uint64_t asked;
    {
      std::lock_guard lock(mu_);
      asked = retainAsked_;
    }
    const TimeMs now = clock_.nowMs();
    if (asked > retainDone_ || now - retainedAt_ >= kHourMs) {
      retainedAt_ = now;
      Status st = retain();
      if (!st.ok()) spdlog::warn("telemetry store: retention failed: {}", st.message());
      std::lock_guard lock(mu_);
      retainStatus_ = st;
      retainDone_ = asked;
      drained_.notify_all();
    }
    if (stopping) {
      std::lock_guard lock(mu_);
      if (queue_.empty()) return;
    }
  }
}

Status SqliteTelemetryStore::write(const std::vector<TelemetryBatch>& batches) {
  sqlite3* db = writeDb_.get();
  Status st = sqlite::exec(db, "BEGIN");
  if (!st.ok()) return st;
  auto fail = [&](Status s) {
    (void)sqlite::exec(db, "ROLLBACK");
    std::lock_guard lock(readMu_);
    for (const auto& b : batches) {
      for (const auto& d : b.usage) {
        UsageCell& c = overlay_[d.alloc][d.minute];
        c += UsageCell{-d.cell.measured, -d.cell.used, -d.cell.idle};
      }
    }
    return s;
  };
  auto rollup = [&](sqlite3_stmt* stmt, const GpuMinute& m, TimeMs bucket) {
    return Binder(stmt)
        .text(m.host)
        .integer(m.gpu)
        .integer(bucket)
        .integer(m.samples)
        .integer(m.utilSamples)
        .real(m.utilSum)
        .integer(m.memoryMaxMib)
        .real(m.temperatureMaxC)
        .real(m.powerSumW)
        .integer(m.powerSamples)
        .run();
  };
  auto usage = [&](sqlite3_stmt* stmt, int64_t alloc, TimeMs bucket, const UsageCell& c) {
    return Binder(stmt)
        .integer(alloc)
        .integer(bucket)
        .integer(c.measured)
        .integer(c.used)
        .integer(c.idle)
        .run();
  };
  std::map<int64_t, UsageCell> totals;
  for (const auto& b : batches) {
    for (const auto& r : b.samples) {
      Binder bind(statements_->insertSample.get());
      bind.text(r.host).integer(r.sample.index).integer(r.at);
      bindOptional(bind, r.sample.utilizationPct);
      bindOptional(bind, r.sample.memoryUsedMib);
      bindOptional(bind, r.sample.temperatureC);
      bindOptional(bind, r.sample.powerW);
      bindOptional(bind, r.sample.smClockMhz);
      bindOptional(bind, r.sample.eccCorrected);
      bindOptional(bind, r.sample.eccUncorrected);
      if (st = bind.run(); !st.ok()) return fail(st.withContext("gpu sample"));
    }
    for (const auto& m : b.gpuMinutes) {
      if (st = rollup(statements_->upsertGpuMinute.get(), m, m.minute); !st.ok())
        return fail(st.withContext("gpu minute"));
      if (st = rollup(statements_->upsertGpuHour.get(), m, bucketOf(m.minute, kHourMs)); !st.ok())
        return fail(st.withContext("gpu hour"));
    }
    for (const auto& d : b.usage) {
      if (st = usage(statements_->upsertUsageMinute.get(), d.alloc, d.minute, d.cell); !st.ok())
        return fail(st.withContext("usage minute"));
      if (st = usage(statements_->upsertUsageHour.get(), d.alloc, bucketOf(d.minute, kHourMs),
                     d.cell);
          !st.ok())
        return fail(st.withContext("usage hour"));
      totals[d.alloc] += d.cell;
    }
  }
  for (const auto& [alloc, c] : totals) {
    if (st = Binder(statements_->upsertTotal.get())
                 .integer(alloc)
                 .integer(c.measured)
                 .integer(c.used)
                 .integer(c.idle)
                 .run();
        !st.ok())
      return fail(st.withContext("usage total"));
  }
  // COMMIT under readMu_, and the overlay shrinks in the same breath: a reader sees each cell
  // either in the overlay or in the tables, never both, never neither.
  std::lock_guard lock(readMu_);
  if (st = sqlite::exec(db, "COMMIT"); !st.ok()) {
    (void)sqlite::exec(db, "ROLLBACK");
    for (const auto& b : batches)
      for (const auto& d : b.usage)
        overlay_[d.alloc][d.minute] += UsageCell{-d.cell.measured, -d.cell.used, -d.cell.idle};
    return st;
  }
  for (const auto& b : batches) {
    for (const auto& d : b.usage) {
      auto a = overlay_.find(d.alloc);
      if (a == overlay_.end()) continue;
      auto m = a->second.find(d.minute);
      if (m == a->second.end()) continue;
      m->second += UsageCell{-d.cell.measured, -d.cell.used, -d.cell.idle};
      if (m->second.empty()) a->second.erase(m);
      if (a->second.empty()) overlay_.erase(a);
    }
  }
  return Status::Ok();
}

Status SqliteTelemetryStore::applyRetention() {
  std::unique_lock lock(mu_);
  const uint64_t ticket = ++retainAsked_;
  wake_.notify_one();
  drained_.wait(lock, [&] { return retainDone_ >= ticket; });
  return retainStatus_;
}

Status SqliteTelemetryStore::retain() {
  const TimeMs now = clock_.nowMs();
  sqlite3* db = writeDb_.get();
  struct Cut {
    const char* sql;
    int64_t keepMs;
  };
  const Cut cuts[] = {
      {"DELETE FROM gpu_samples WHERE at_ms < ?", retention_.rawMs},
      {"DELETE FROM gpu_minutes WHERE bucket < ?", retention_.minutesMs},
      {"DELETE FROM usage_minutes WHERE bucket < ?", retention_.minutesMs},
      {"DELETE FROM gpu_hours WHERE bucket < ?", retention_.hoursMs},
      {"DELETE FROM usage_hours WHERE bucket < ?", retention_.hoursMs},
  };
  for (const auto& c : cuts) {
    if (c.keepMs <= 0) continue;  // kept for ever
    auto stmt = sqlite::prepare(db, c.sql);
    if (!stmt.ok()) return stmt.status();
    if (Status st = Binder(stmt->get()).integer(now - c.keepMs).run(); !st.ok()) return st;
  }
  return Status::Ok();
}

Result<std::vector<GpuPoint>> SqliteTelemetryStore::gpuHistory(const std::string& host, int gpu,
                                                               TimeMs from, TimeMs to,
                                                               Resolution resolution,
                                                               size_t limit) {
  std::string sql;
  if (resolution == Resolution::kRaw) {
    sql =
        "SELECT at_ms, 1, util_pct, memory_mib, temperature_c, power_w FROM gpu_samples"
        " WHERE host = ? AND gpu = ? AND at_ms >= ? AND at_ms < ? ORDER BY at_ms LIMIT ?";
  } else {
    // A bucket that began before `from` but reaches into the window belongs to it.
    const char* table = resolution == Resolution::kMinute ? "gpu_minutes" : "gpu_hours";
    sql = std::string(
              "SELECT bucket, samples, CASE WHEN util_samples > 0 THEN util_sum / "
              "util_samples END, memory_max_mib, temperature_max_c, CASE WHEN "
              "power_samples > 0 THEN power_sum_w / power_samples END FROM ") +
          table +
          " WHERE host = ? AND gpu = ? AND bucket >= ? AND bucket < ? ORDER BY bucket LIMIT ?";
    from = bucketOf(from, resolution == Resolution::kMinute ? kMinuteMs : kHourMs);
  }
  std::lock_guard lock(readMu_);
  auto stmt = sqlite::prepare(readDb_.get(), sql);
  if (!stmt.ok()) return stmt.status().withContext("failed to read " + path_);
  sqlite3_stmt* st = stmt->get();
  sqlite3_bind_text(st, 1, host.data(), static_cast<int>(host.size()), SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, gpu);
  sqlite3_bind_int64(st, 3, from);
  sqlite3_bind_int64(st, 4, to);
  sqlite3_bind_int64(st, 5, static_cast<int64_t>(limit));
  std::vector<GpuPoint> out;
  auto real = [&](int col) -> std::optional<double> {
    if (sqlite3_column_type(st, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_double(st, col);
  };
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    GpuPoint p;
    p.at = sqlite::columnInt(st, 0);
    p.samples = sqlite::columnInt(st, 1);
    p.utilizationPct = real(2);
    if (sqlite3_column_type(st, 3) != SQLITE_NULL) p.memoryMaxMib = sqlite::columnInt(st, 3);
    p.temperatureMaxC = real(4);
    p.powerW = real(5);
    out.push_back(p);
  }
  if (rc != SQLITE_DONE) return sqlite::lastError(readDb_.get(), rc, "failed to read " + path_);
  return out;
}

UsageCell SqliteTelemetryStore::sumTier(bool hours, int64_t alloc, TimeMs from, TimeMs to) {
  const int64_t size = hours ? kHourMs : kMinuteMs;
  sqlite3_stmt* stmt = hours ? sumHours_.get() : sumMinutes_.get();
  UsageCell sum;
  Binder bind(stmt);
  bind.integer(alloc).integer(bucketOf(from, size)).integer(to);
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    const TimeMs bucket = sqlite::columnInt(stmt, 0);
    const UsageCell c{sqlite::columnInt(stmt, 1), sqlite::columnInt(stmt, 2),
                      sqlite::columnInt(stmt, 3)};
    const TimeMs s = std::max(from, bucket);
    const TimeMs e = std::min(to, bucket + size);
    if (e > s) sum += e - s == size ? c : c.scaled(e - s, size);
  }
  return sum;
}

UsageCell SqliteTelemetryStore::sumFinest(int64_t alloc, TimeMs from, TimeMs to) {
  if (to <= from) return {};
  const TimeMs minutesFrom =
      retention_.minutesMs > 0 ? clock_.nowMs() - retention_.minutesMs : INT64_MIN;
  return sumTier(from < minutesFrom, alloc, from, to);
}

std::optional<UsageCell> SqliteTelemetryStore::usageWithin(int64_t alloc, TimeMs from, TimeMs to) {
  if (to <= from) return UsageCell{};
  if (retention_.hoursMs > 0 && from < bucketOf(clock_.nowMs() - retention_.hoursMs, kHourMs))
    return std::nullopt;
  std::lock_guard lock(readMu_);
  UsageCell sum;
  if (auto a = overlay_.find(alloc); a != overlay_.end()) {
    for (const auto& [minute, c] : a->second) {
      const TimeMs s = std::max(from, minute);
      const TimeMs e = std::min(to, minute + kMinuteMs);
      if (e > s) sum += e - s == kMinuteMs ? c : c.scaled(e - s, kMinuteMs);
    }
  }
  const TimeMs h1 = bucketOf(from + kHourMs - 1, kHourMs);  // first whole hour
  const TimeMs h2 = bucketOf(to, kHourMs);                  // end of the last whole hour
  if (h1 >= h2) return sum += sumFinest(alloc, from, to);
  sum += sumTier(true, alloc, h1, h2);
  sum += sumFinest(alloc, from, h1);
  sum += sumFinest(alloc, h2, to);
  return sum;
}

}  // namespace allot::telemetry

namespace allot::telemetry {

Result<std::unique_ptr<TelemetryStore>> TelemetryStore::open(const std::string& path,
                                                             TelemetryRetention retention,
                                                             const Clock& clock) {
  auto engine = SqliteTelemetryStore::open(path, retention, clock);
  if (!engine.ok()) return engine.status();
  return std::unique_ptr<TelemetryStore>(std::move(engine).value());
}

}  // namespace allot::telemetry
