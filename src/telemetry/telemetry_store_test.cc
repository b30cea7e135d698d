// TelemetryStore on a real SQLite file: batches land in the tiers and totals, a window reads
// whole hours from hours and the rest from minutes, nothing is lost or counted twice between
// submit and commit, and retention cuts each tier at its age.

#include "telemetry/telemetry_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "store/sqlite/sqlite_test_support.h"

namespace allot::telemetry {
namespace {

constexpr TimeMs kT0 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr int64_t kGpuMinute = kMinuteMs * 1000;

class TelemetryStoreTest : public ::testing::Test {
 protected:
  void TearDown() override { store_.reset(); }
  void open(TelemetryRetention r = {}) {
    store_.reset();
    auto s = TelemetryStore::open(dbPath_, r, clock_);
    ASSERT_TRUE(s.ok()) << s.status().toString();
    store_ = std::move(s).value();
  }
  int64_t count(const char* table) {
    sqlite3* db = nullptr;
    sqlite3_open_v2(dbPath_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, (std::string("SELECT count(*) FROM ") + table).c_str(), -1, &st,
                       nullptr);
    sqlite3_step(st);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
  }
  // Allocation 7 fully used for `minutes` minutes from `start`, one whole GPU.
  static TelemetryBatch fullMinutes(TimeMs start, int minutes) {
    TelemetryBatch b;
    for (int m = 0; m < minutes; ++m)
      b.usage.push_back({7, start + m * kMinuteMs, {kGpuMinute, kGpuMinute, 0}});
    return b;
  }

  FakeClock clock_{kT0 + 48 * kHourMs};
  store::test::ScratchDir dir_{"allot-telemetry-test"};
  const std::string dbPath_ = dir_.file("telemetry.db");
  std::unique_ptr<TelemetryStore> store_;
};

TEST_F(TelemetryStoreTest, AWindowReadsHoursAndMinutesAndProratesCutBuckets) {
  open();
  store_->submit(fullMinutes(kT0, 180));  // three hours
  store_->flush();
  EXPECT_EQ(count("usage_minutes"), 180);
  EXPECT_EQ(count("usage_hours"), 3);
  EXPECT_EQ(store_->usageWithin(7, kT0, kT0 + 3 * kHourMs)->used, 180 * kGpuMinute);
  // 00:30:30 to 02:10:15: half an hour and a bit, a whole hour, ten minutes and a quarter.
  auto part = store_->usageWithin(7, kT0 + 30 * kMinuteMs + 30'000,
                                  kT0 + 2 * kHourMs + 10 * kMinuteMs + 15'000);
  ASSERT_TRUE(part);
  EXPECT_EQ(part->measured, (99 * kMinuteMs + 45'000) * 1000);
  EXPECT_EQ(store_->usageWithin(8, kT0, kT0 + kHourMs)->measured, 0);

  // Totals come back after a reopen.
  open();
  auto totals = store_->loadTotals();
  ASSERT_TRUE(totals.ok());
  ASSERT_EQ(totals->size(), 1u);
  EXPECT_EQ((*totals)[0].first, 7);
  EXPECT_EQ((*totals)[0].second.used, 180 * kGpuMinute);
}

TEST_F(TelemetryStoreTest, SubmittedUseIsReadableBeforeAndAfterItsCommitExactlyOnce) {
  open();
  for (int round = 0; round < 50; ++round) {
    store_->submit(fullMinutes(kT0, 10));
    auto got = store_->usageWithin(7, kT0, kT0 + kHourMs);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->used, (round + 1) * 10 * kGpuMinute);  // whether or not committed yet
  }
  store_->flush();
  EXPECT_EQ(store_->usageWithin(7, kT0, kT0 + kHourMs)->used, 500 * kGpuMinute);
}

TEST_F(TelemetryStoreTest, SamplesAndGpuRollupsAreKept) {
  open();
  TelemetryBatch b;
  model::GpuSample s;
  s.index = 1;
  s.utilizationPct = 40;
  s.memoryUsedMib = 1000;
  const TimeMs hour = bucketOf(clock_.nowMs(), kHourMs);
  b.samples.push_back({"gpu-a", hour, s});
  s.utilizationPct.reset();  // an older GPU that reports no utilisation: NULL, not 0
  b.samples.push_back({"gpu-a", hour + 5000, s});
  b.gpuMinutes.push_back({"gpu-a", 1, hour, 2, 1, 40, 1000, 50, 0, 0});
  b.gpuMinutes.push_back({"gpu-a", 1, hour + kMinuteMs, 1, 1, 60, 900, 55, 0, 0});
  store_->submit(std::move(b));
  store_->flush();
  EXPECT_EQ(store_->samplesCommitted(), 2u);
  EXPECT_EQ(count("gpu_samples"), 2);
  EXPECT_EQ(count("gpu_samples WHERE util_pct IS NULL"), 1);
  EXPECT_EQ(count("gpu_minutes"), 2);
  EXPECT_EQ(count("gpu_hours WHERE samples = 3 AND util_sum = 100 AND memory_max_mib = 1000"), 1);

  // A GPU's history at each resolution: means and maxima, NULL utilisation kept unknown.
  auto raw = store_->gpuHistory("gpu-a", 1, hour, hour + kHourMs, Resolution::kRaw, 100);
  ASSERT_TRUE(raw.ok());
  ASSERT_EQ(raw->size(), 2u);
  EXPECT_EQ((*raw)[0].utilizationPct, 40);
  EXPECT_FALSE((*raw)[1].utilizationPct);
  auto minutes =
      store_->gpuHistory("gpu-a", 1, hour + 30'000, hour + kHourMs, Resolution::kMinute, 100);
  ASSERT_TRUE(minutes.ok());
  ASSERT_EQ(minutes->size(), 2u);  // the minute the window starts inside belongs to it
  EXPECT_EQ((*minutes)[0].utilizationPct, 40);
  EXPECT_EQ((*minutes)[1].temperatureMaxC, 55);
  auto hours = store_->gpuHistory("gpu-a", 1, hour, hour + kHourMs, Resolution::kHour, 100);
  ASSERT_TRUE(hours.ok());
  ASSERT_EQ(hours->size(), 1u);
  EXPECT_EQ((*hours)[0].samples, 3);
  EXPECT_EQ((*hours)[0].utilizationPct, 50);
  EXPECT_EQ((*hours)[0].memoryMaxMib, 1000);
  EXPECT_TRUE(store_->gpuHistory("gpu-a", 0, hour, hour + kHourMs, Resolution::kRaw, 100)->empty());
  EXPECT_EQ(store_->gpuHistory("gpu-a", 1, hour, hour + kHourMs, Resolution::kRaw, 1)->size(), 1u);
}

TEST_F(TelemetryStoreTest, RetentionCutsEachTierAtItsAge) {
  open({kHourMs, 2 * kHourMs, 24 * kHourMs});
  TelemetryBatch b = fullMinutes(kT0 + 40 * kHourMs, 60 * 8);  // 40 h to 48 h after kT0
  model::GpuSample s;
  b.samples.push_back({"gpu-a", kT0 + 46 * kHourMs, s});
  b.samples.push_back({"gpu-a", kT0 + 47 * kHourMs + 1, s});
  store_->submit(std::move(b));
  store_->flush();
  ASSERT_TRUE(store_->applyRetention().ok());  // now = 48 h
  EXPECT_EQ(count("gpu_samples"), 1);
  EXPECT_EQ(count("usage_minutes"), 120);
  EXPECT_EQ(count("usage_hours"), 8);
  // Older than the minutes keep: the hour rows, prorated. Older than the hours keep: unknown.
  EXPECT_EQ(store_->usageWithin(7, kT0 + 40 * kHourMs + 30 * kMinuteMs, kT0 + 41 * kHourMs)->used,
            30 * kGpuMinute);
  EXPECT_FALSE(store_->usageWithin(7, kT0 + 20 * kHourMs, kT0 + 41 * kHourMs));
  // The totals are not cut.
  EXPECT_EQ((*store_->loadTotals())[0].second.used, 480 * kGpuMinute);
}

}  // namespace
}  // namespace allot::telemetry
