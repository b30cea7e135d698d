// The usage report (control::usageReport) over a synthetic allocation ledger: a fleet of 1,000
// GPUs (125 hosts of 8, two models) each allocated one job an hour for a year, 8,760,000 closed
// intervals, spread over 10 teams, 50 projects and 200 users. The report scans every interval
// once; the target is a report over the whole year in under 500 ms. Numbers in docs/benchmarks.md.
//
//   build/bin/usage_bench --benchmark_min_time=1

#include <benchmark/benchmark.h>

#include <string>

#include "control/usage_report.h"

namespace allot::control {
namespace {

constexpr int kHosts = 125;
constexpr int kGpusPerHost = 8;
constexpr int kHours = 365 * 24;
constexpr TimeMs kHourMs = 3'600'000;
constexpr TimeMs kYearStart = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

const LedgerIndex& yearOfLedger() {
  static const LedgerIndex* index = [] {
    auto* ix = new LedgerIndex;
    std::string hosts[kHosts];
    for (int h = 0; h < kHosts; ++h) hosts[h] = "gpu-" + std::to_string(h);
    int64_t seq = 1;
    model::LedgerEntry open;
    open.gpuIndices = {0};
    model::LedgerEntry close;
    close.kind = model::LedgerKind::kClose;
    for (int hour = 0; hour < kHours; ++hour) {
      for (int g = 0; g < kHosts * kGpusPerHost; ++g) {
        // Starts a few seconds apart within the hour, so the ledger is in start order as a live
        // one is; each job holds its GPU for 50 to 59 minutes.
        const int64_t job = seq;
        open.seq = seq++;
        open.jobId = job;
        open.team = "team-" + std::to_string(g % 10);
        open.project = "project-" + std::to_string(g % 50);
        open.user = "user-" + std::to_string((g * 7 + hour) % 200);
        open.host = hosts[g / kGpusPerHost];
        open.gpuModel = g < 500 ? "A100" : "H100";
        open.gpuIndices[0] = g % kGpusPerHost;
        open.startAt = kYearStart + hour * kHourMs + g * 3'000;
        ix->apply(open);
        close.seq = seq++;
        close.ref = open.seq;
        close.jobId = job;
        close.endAt = open.startAt + (50 + g % 10) * 60'000;
        ix->apply(close);
      }
    }
    return ix;
  }();
  return *index;
}

void BM_UsageReportYear(benchmark::State& state) {
  const LedgerIndex& index = yearOfLedger();
  UsageQuery q;
  q.by = static_cast<UsageBy>(state.range(0));
  q.from = kYearStart;
  q.to = kYearStart + kHours * kHourMs;
  q.now = q.to;
  size_t rows = 0;
  for (auto _ : state) {
    auto r = usageReport(index, q);
    rows = r.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["intervals"] = static_cast<double>(index.intervals().size());
  state.counters["rows"] = static_cast<double>(rows);
  state.SetLabel(usageByName(q.by));
}
BENCHMARK(BM_UsageReportYear)
    ->Arg(static_cast<int>(UsageBy::kTeam))
    ->Arg(static_cast<int>(UsageBy::kProject))
    ->Arg(static_cast<int>(UsageBy::kUser))
    ->Arg(static_cast<int>(UsageBy::kHost))
    ->Arg(static_cast<int>(UsageBy::kGpuModel))
    ->Unit(benchmark::kMillisecond);

// One team's view (what a member asks for) over the last 30 days of the year.
void BM_UsageReportOneTeamLast30Days(benchmark::State& state) {
  const LedgerIndex& index = yearOfLedger();
  UsageQuery q;
  q.by = UsageBy::kUser;
  q.to = kYearStart + kHours * kHourMs;
  q.from = q.to - 30 * 24 * kHourMs;
  q.now = q.to;
  q.team = "team-3";
  for (auto _ : state) benchmark::DoNotOptimize(usageReport(index, q));
}
BENCHMARK(BM_UsageReportOneTeamLast30Days)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace allot::control

BENCHMARK_MAIN();
