// The usage report with used and idle GPU time, over a year of per-minute rollups for 1,000 GPUs,
// read from a real telemetry.db. The fleet: 125 hosts of 8 GPUs, each host running one 8-GPU job
// a day from 00:05 to 23:55, every minute of it sampled: 45,625 allocations, 65.7 million
// per-minute usage rows and 1.1 million per-hour rows (a row is one allocation's minute, so the
// 8 GPUs of a job share one). The database is built once and kept in --data-dir (about 2 GB;
// building it takes a minute or two), written straight into telemetry.db's tables rather than
// through the ingest path, which telemetry_ingest measures. The target is a report in under
// 500 ms. Numbers in docs/benchmarks.md.
//
//   ALLOT_BENCH_DIR=/tmp/allot-usage-year build/bin/usage_year_bench --benchmark_min_time=1

#include <benchmark/benchmark.h>
#include <sqlite3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "control/usage_report.h"
#include "telemetry/telemetry_store.h"

namespace allot {
namespace {

using telemetry::kHourMs;
using telemetry::kMinuteMs;
using telemetry::UsageCell;

constexpr int kHosts = 125;
constexpr int kGpusPerHost = 8;
constexpr int kDays = 365;
constexpr TimeMs kDayMs = 24 * kHourMs;
constexpr TimeMs kYearStart = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr TimeMs kJobStart = 5 * kMinuteMs, kJobEnd = kDayMs - 5 * kMinuteMs;

int64_t allocOf(int day, int host) { return 1 + static_cast<int64_t>(day) * kHosts + host; }

// One minute of one job: utilisation wanders between 0 and 100%; under 5% is idle.
UsageCell minuteOf(int64_t alloc, int64_t minute) {
  const int64_t measured = kGpusPerHost * 1000 * kMinuteMs;
  const int pct = static_cast<int>((alloc * 31 + minute * 7) % 101);
  return {measured, measured * pct / 100, pct < 5 ? measured : 0};
}

void check(int rc, sqlite3* db, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE) {
    std::fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
    std::exit(1);
  }
}

void buildDatabase(const std::string& path) {
  std::fprintf(stderr, "building %s (once)...\n", path.c_str());
  {
    FakeClock clock(kYearStart);
    auto s = telemetry::TelemetryStore::open(path, {0, 0, 0}, clock);  // creates the schema
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.status().toString().c_str());
      std::exit(1);
    }
  }
  sqlite3* db = nullptr;
  check(sqlite3_open(path.c_str(), &db), db, "open");
  check(sqlite3_exec(db, "PRAGMA synchronous=OFF; BEGIN", nullptr, nullptr, nullptr), db, "begin");
  sqlite3_stmt *minute = nullptr, *hour = nullptr, *total = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO usage_minutes VALUES (?,?,?,?,?)", -1, &minute, nullptr);
  sqlite3_prepare_v2(db, "INSERT INTO usage_hours VALUES (?,?,?,?,?)", -1, &hour, nullptr);
  sqlite3_prepare_v2(db, "INSERT INTO usage_totals VALUES (?,?,?,?)", -1, &total, nullptr);
  auto put = [&](sqlite3_stmt* st, int64_t alloc, TimeMs bucket, const UsageCell& c) {
    sqlite3_bind_int64(st, 1, alloc);
    int i = 2;
    if (bucket >= 0) sqlite3_bind_int64(st, i++, bucket);
    sqlite3_bind_int64(st, i++, c.measured);
    sqlite3_bind_int64(st, i++, c.used);
    sqlite3_bind_int64(st, i++, c.idle);
    check(sqlite3_step(st), db, "insert");
    sqlite3_reset(st);
  };
  // In key order (alloc, bucket), which is how SQLite appends fastest.
  for (int day = 0; day < kDays; ++day) {
    for (int h = 0; h < kHosts; ++h) {
      const int64_t alloc = allocOf(day, h);
      const TimeMs dayStart = kYearStart + day * kDayMs;
      UsageCell whole, hourSum;
      TimeMs hourAt = -1;
      for (TimeMs t = dayStart + kJobStart; t < dayStart + kJobEnd; t += kMinuteMs) {
        const UsageCell c = minuteOf(alloc, t / kMinuteMs);
        put(minute, alloc, t, c);
        const TimeMs hb = telemetry::bucketOf(t, kHourMs);
        if (hb != hourAt && hourAt >= 0) put(hour, alloc, hourAt, hourSum), hourSum = {};
        hourAt = hb;
        hourSum += c;
        whole += c;
      }
      put(hour, alloc, hourAt, hourSum);
      put(total, alloc, -1, whole);
    }
  }
  for (auto* st : {minute, hour, total}) sqlite3_finalize(st);
  check(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), db, "commit");
  sqlite3_close(db);
}

struct Fixture {
  FakeClock clock{kYearStart + kDays * kDayMs};
  control::LedgerIndex index;
  std::unique_ptr<telemetry::TelemetryStore> store;
};

Fixture& fixture() {
  static Fixture* f = [] {
    const char* env = std::getenv("ALLOT_BENCH_DIR");
    const std::filesystem::path dir = env ? env : "/tmp/allot-usage-year";
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "telemetry.db").string();
    if (!std::filesystem::exists(dir / "complete")) {
      std::filesystem::remove(path);
      buildDatabase(path);
      std::FILE* done = std::fopen((dir / "complete").c_str(), "w");
      if (done) std::fclose(done);
    }
    auto* fx = new Fixture;
    // Minutes and hours kept for ever: the whole year is there in detail.
    auto s = telemetry::TelemetryStore::open(path, {0, 0, 0}, fx->clock);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.status().toString().c_str());
      std::exit(1);
    }
    fx->store = std::move(s).value();
    model::LedgerEntry open, close;
    close.kind = model::LedgerKind::kClose;
    open.gpuIndices = {0, 1, 2, 3, 4, 5, 6, 7};
    open.gpuModel = "H100";
    int64_t seq = 1;
    for (int day = 0; day < kDays; ++day) {
      for (int h = 0; h < kHosts; ++h) {
        open.seq = seq++;  // allocOf(day, h): opens first, closes numbered after the year
        open.jobId = open.seq;
        open.team = "team-" + std::to_string(h % 10);
        open.project = "project-" + std::to_string(h % 50);
        open.user = "user-" + std::to_string((h * 7 + day) % 200);
        open.host = "gpu-" + std::to_string(h);
        open.startAt = kYearStart + day * kDayMs + kJobStart;
        fx->index.apply(open);
      }
    }
    for (int64_t alloc = 1; alloc < seq; ++alloc) {
      close.seq = seq + alloc;
      close.ref = alloc;
      close.jobId = alloc;
      close.endAt = fx->index.interval(alloc)->start + (kJobEnd - kJobStart);
      fx->index.apply(close);
    }
    auto totals = fx->store->loadTotals();
    for (const auto& [alloc, cell] : *totals) fx->index.addUsage(alloc, cell);
    return fx;
  }();
  return *f;
}

void report(benchmark::State& state, TimeMs from, TimeMs to) {
  Fixture& fx = fixture();
  control::UsageQuery q;
  q.by = static_cast<control::UsageBy>(state.range(0));
  q.from = from;
  q.to = to;
  q.now = fx.clock.nowMs();
  int cut = 0;
  auto within = [&](int64_t alloc, TimeMs a, TimeMs b) {
    ++cut;
    return fx.store->usageWithin(alloc, a, b);
  };
  double efficiency = 0;
  for (auto _ : state) {
    cut = 0;
    auto rows = control::usageReport(fx.index, q, within);
    int64_t used = 0, allocated = 0;
    for (const auto& r : rows) used += r.usage.used, allocated += r.milliGpuMs;
    efficiency = allocated ? static_cast<double>(used) / allocated : 0;
    benchmark::DoNotOptimize(rows);
  }
  state.counters["allocations"] = static_cast<double>(fx.index.intervals().size());
  state.counters["cut_by_window"] = cut;
  state.counters["efficiency"] = efficiency;
  state.SetLabel(control::usageByName(q.by));
}

// The whole year: every allocation lies inside, so totals alone answer.
void BM_YearOfRollups(benchmark::State& state) {
  report(state, kYearStart, kYearStart + kDays * kDayMs);
}
// 15 March 13:37:20 to 2 September 08:11:45: the 250 jobs the edges cut read their hours and
// minutes inside the window from telemetry.db.
void BM_YearOfRollupsCutWindow(benchmark::State& state) {
  const TimeMs from = kYearStart + 73 * kDayMs + 13 * kHourMs + 37 * kMinuteMs + 20'000;
  const TimeMs to = kYearStart + 244 * kDayMs + 8 * kHourMs + 11 * kMinuteMs + 45'000;
  report(state, from, to);
}
BENCHMARK(BM_YearOfRollups)
    ->Arg(static_cast<int>(control::UsageBy::kTeam))
    ->Arg(static_cast<int>(control::UsageBy::kUser))
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_YearOfRollupsCutWindow)
    ->Arg(static_cast<int>(control::UsageBy::kTeam))
    ->Arg(static_cast<int>(control::UsageBy::kUser))
    ->Arg(static_cast<int>(control::UsageBy::kHost))
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace allot

BENCHMARK_MAIN();
