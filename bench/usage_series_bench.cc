// The usage report over time (control::usageSeries) for the console's charts: 30 days of a
// 64-GPU cluster's allocations, 5,000 jobs of 1 to 24 hours (some still open), each with
// measured use, cut into 720 buckets of an hour, by team and by user. Three ways to read the
// use of a job a bucket edge cuts: prorated (no reads), and through a `within` callback that
// answers from memory (the cost of the pass itself, the number of reads in the counter
// "within_calls"). allotd's `within` reads telemetry.db (see usage_year_bench for that cost).
//
//   build/bin/usage_series_bench --benchmark_min_time=1

#include <benchmark/benchmark.h>

#include <string>

#include "control/usage_series.h"

namespace allot::control {
namespace {

constexpr TimeMs kHourMs = 3'600'000;
constexpr TimeMs kStart = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr int kJobs = 5000;
constexpr int kDays = 30;

const LedgerIndex& monthOfJobs() {
  static const LedgerIndex* index = [] {
    auto* ix = new LedgerIndex;
    int64_t seq = 1;
    model::LedgerEntry open;
    model::LedgerEntry close;
    close.kind = model::LedgerKind::kClose;
    for (int j = 0; j < kJobs; ++j) {
      const int64_t job = seq;
      open.seq = seq++;
      open.jobId = job;
      open.team = "team-" + std::to_string(j % 8);
      open.project = "project-" + std::to_string(j % 24);
      open.user = "user-" + std::to_string((j * 7) % 60);
      open.host = "gpu-" + std::to_string(j % 8);
      open.gpuModel = "H100";
      open.gpuIndices = {0, 1};
      open.startAt = kStart + static_cast<TimeMs>(j) * kDays * 24 * kHourMs / kJobs;
      ix->apply(open);
      const TimeMs length = (1 + j % 24) * kHourMs - (j % 13) * 60'000;
      ix->addUsage(open.seq, {length * 2000, length * 1200, length * 300});
      if (j % 50 == 49) continue;  // still running
      close.seq = seq++;
      close.ref = open.seq;
      close.jobId = job;
      close.endAt = open.startAt + length;
      ix->apply(close);
    }
    return ix;
  }();
  return *index;
}

SeriesQuery monthQuery(UsageBy by) {
  SeriesQuery q;
  q.by = by;
  q.from = kStart;
  q.to = kStart + kDays * 24 * kHourMs;
  q.step = kHourMs;  // 720 buckets
  q.now = q.to;
  return q;
}

void BM_UsageSeries720Buckets(benchmark::State& state) {
  const LedgerIndex& index = monthOfJobs();
  const SeriesQuery q = monthQuery(static_cast<UsageBy>(state.range(0)));
  const bool withReads = state.range(1) != 0;
  int64_t calls = 0;
  UsageWithin within = [&calls](int64_t, TimeMs from, TimeMs to) {
    ++calls;
    return std::optional<telemetry::UsageCell>(
        telemetry::UsageCell{(to - from) * 2000, (to - from) * 1200, (to - from) * 300});
  };
  size_t rows = 0;
  for (auto _ : state) {
    calls = 0;
    auto out = withReads ? usageSeries(index, q, within) : usageSeries(index, q);
    rows = out.size();
    benchmark::DoNotOptimize(out);
  }
  state.counters["rows"] = static_cast<double>(rows);
  state.counters["within_calls"] = static_cast<double>(calls);
}
// by: 0 team, 2 user; reads: 0 prorated, 1 through `within`.
BENCHMARK(BM_UsageSeries720Buckets)
    ->ArgsProduct({{0, 2}, {0, 1}})
    ->ArgNames({"by", "within"})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace allot::control

BENCHMARK_MAIN();
