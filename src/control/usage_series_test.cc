// The usage report over time on a hand-built ledger: intervals clipped to the window and cut at
// bucket edges, open ones counted up to now, measured use whole or asked for by piece, and the
// sum over buckets equal to the usage report's for the same window.

#include "control/usage_series.h"

#include <gtest/gtest.h>

#include <numeric>

namespace allot::control {
namespace {

model::LedgerEntry opened(int64_t seq, const std::string& team, const std::string& user, int gpus,
                          TimeMs start) {
  model::LedgerEntry e;
  e.seq = seq;
  e.jobId = seq;
  e.team = team;
  e.project = "p";
  e.user = user;
  e.host = "h1";
  e.gpuModel = "A100";
  for (int g = 0; g < gpus; ++g) e.gpuIndices.push_back(g);
  e.gpuMilli = 1000;
  e.startAt = start;
  return e;
}

model::LedgerEntry closed(int64_t seq, int64_t ref, TimeMs end) {
  model::LedgerEntry e;
  e.seq = seq;
  e.kind = model::LedgerKind::kClose;
  e.ref = ref;
  e.jobId = ref;
  e.endAt = end;
  return e;
}

SeriesQuery query(TimeMs from, TimeMs to, TimeMs step, TimeMs now) {
  SeriesQuery q;
  q.from = from;
  q.to = to;
  q.step = step;
  q.now = now;
  return q;
}

TEST(UsageSeriesTest, BucketCountRoundsUp) {
  EXPECT_EQ(seriesBucketCount(0, 100, 50), 2);
  EXPECT_EQ(seriesBucketCount(0, 101, 50), 3);
  EXPECT_EQ(seriesBucketCount(10, 10, 50), 0);
  EXPECT_EQ(seriesBucketCount(0, 10, 0), 0);
}

TEST(UsageSeriesTest, ClipsIntervalsToTheWindowAndCutsThemAtBucketEdges) {
  LedgerIndex index;
  index.apply(opened(1, "vision", "alice", 2, 0));
  index.apply(opened(2, "nlp", "bob", 1, 20));  // still open: counts up to now
  index.apply(closed(3, 1, 100));
  index.apply(opened(4, "vision", "alice", 1, 200));  // after the window
  // Buckets [10,60) [60,110) [110,130): the last one is short.
  auto rows = usageSeries(index, query(10, 130, 50, 130));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "nlp");
  EXPECT_EQ(rows[0].milliGpuMs, (std::vector<int64_t>{1000 * 40, 1000 * 50, 1000 * 20}));
  EXPECT_EQ(rows[1].name, "vision");
  EXPECT_EQ(rows[1].milliGpuMs, (std::vector<int64_t>{2000 * 50, 2000 * 40, 0}));

  SeriesQuery byUser = query(10, 130, 50, 130);
  byUser.by = UsageBy::kUser;
  byUser.team = "vision";
  rows = usageSeries(index, byUser);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].name, "alice");
  EXPECT_TRUE(usageSeries(index,
                          [] {
                            SeriesQuery q = query(10, 130, 50, 130);
                            q.team = "nobody";
                            return q;
                          }())
                  .empty());
}

TEST(UsageSeriesTest, SumOverBucketsEqualsTheUsageReport) {
  LedgerIndex index;
  int64_t seq = 1;
  for (int j = 0; j < 40; ++j) {
    const int64_t open = seq++;
    index.apply(
        opened(open, j % 3 == 0 ? "a" : "b", "u" + std::to_string(j % 5), 1 + j % 4, j * 37));
    if (j % 7 != 0) index.apply(closed(seq++, open, j * 37 + 50 + j * 13));
  }
  UsageQuery uq;
  uq.from = 100;
  uq.to = 1500;
  uq.now = 1400;
  uq.by = UsageBy::kUser;
  SeriesQuery sq = query(100, 1500, 130, 1400);
  sq.by = UsageBy::kUser;
  auto report = usageReport(index, uq);
  auto series = usageSeries(index, sq);
  ASSERT_EQ(series.size(), report.size());
  for (size_t k = 0; k < report.size(); ++k) {
    EXPECT_EQ(series[k].name, report[k].name);
    EXPECT_EQ(std::accumulate(series[k].milliGpuMs.begin(), series[k].milliGpuMs.end(), 0LL),
              report[k].milliGpuMs)
        << report[k].name;
  }
}

TEST(UsageSeriesTest, MeasuredUseIsWholeInsideABucketAskedForWhenCutAndProratedPastTheBudget) {
  LedgerIndex index;
  index.apply(opened(1, "vision", "alice", 1, 0));
  index.apply(closed(2, 1, 40));  // wholly inside bucket 0
  index.apply(opened(3, "vision", "alice", 1, 80));
  index.apply(closed(4, 3, 180));  // cut at 100: pieces [80,100) and [100,180)
  index.addUsage(1, {40'000, 20'000, 0});
  index.addUsage(3, {100'000, 50'000, 10'000});
  int calls = 0;
  UsageWithin within = [&](int64_t seq, TimeMs from, TimeMs to) {
    ++calls;
    EXPECT_EQ(seq, 3);
    // All the idle time in the later piece: a prorating answer would split it.
    telemetry::UsageCell c{(to - from) * 1000, (to - from) * 500, from >= 100 ? 10'000 : 0};
    return std::optional<telemetry::UsageCell>(c);
  };
  auto rows = usageSeries(index, query(0, 200, 100, 200), within);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(rows[0].usage[0].used, 20'000 + 10'000);
  EXPECT_EQ(rows[0].usage[0].idle, 0);
  EXPECT_EQ(rows[0].usage[1].idle, 10'000);

  // Out of calls: the cut interval's total is spread over its pieces by time.
  calls = 0;
  rows = usageSeries(index, query(0, 200, 100, 200), within, 0);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(rows[0].usage[0].idle, 2'000);
  EXPECT_EQ(rows[0].usage[1].idle, 8'000);
}

}  // namespace
}  // namespace allot::control
