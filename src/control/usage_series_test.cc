// The usage report over time on a hand-built ledger: intervals clipped to the window and cut at
// bucket edges, open ones counted up to now, measured use whole or asked for by piece, and the
// sum over buckets equal to the usage report's for the same window.

#include "control/usage_series.h"

#include <gtest/gtest.h>

#include <numeric>

#include "control/testsupport/ledger_entries.h"

namespace allot::control {
namespace {

using testsupport::closed;

// Whole A100 GPUs on h1: what every interval here holds.
model::LedgerEntry opened(int64_t seq, const std::string& team, const std::string& user, int gpus,
                          TimeMs start) {
  return testsupport::opened(seq, team, user, "h1", "A100", gpus, 1000, start);
}

// Buckets of `step` over [from, to) by team (of `team` only, when set).
SeriesQuery query(TimeMs from, TimeMs to, TimeMs step, TimeMs now, const std::string& team = "") {
  return {UsageBy::kTeam, from, to, step, now, team};
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

  rows = usageSeries(index, {UsageBy::kUser, 10, 130, 50, 130, "vision"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].name, "alice");
  EXPECT_TRUE(usageSeries(index, query(10, 130, 50, 130, "nobody")).empty());
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
  auto report = usageReport(index, {UsageBy::kUser, 100, 1500, 1400, ""});
  auto series = usageSeries(index, {UsageBy::kUser, 100, 1500, 130, 1400, ""});
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
