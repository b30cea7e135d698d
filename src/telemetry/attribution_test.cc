// UsageAttributor: samples become use of the allocations that held the GPUs, split by minute,
// fractions weighted, idle time below the threshold, holds ending where the ledger says.

#include "telemetry/attribution.h"

#include <gtest/gtest.h>

#include <map>

namespace allot::telemetry {
namespace {

constexpr TimeMs kT0 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z, a minute boundary
constexpr int64_t kS = 1000;

model::LedgerEntry openEntry(int64_t seq, const std::string& host, std::vector<int> gpus, int milli,
                             TimeMs start) {
  model::LedgerEntry e;
  e.seq = seq;
  e.kind = model::LedgerKind::kOpen;
  e.jobId = seq;
  e.host = host;
  e.gpuIndices = std::move(gpus);
  e.gpuMilli = milli;
  e.startAt = start;
  return e;
}

model::LedgerEntry closeEntry(int64_t seq, int64_t ref, TimeMs end) {
  model::LedgerEntry e;
  e.seq = seq;
  e.kind = model::LedgerKind::kClose;
  e.ref = ref;
  e.endAt = end;
  return e;
}

model::Telemetry round(TimeMs agentAt, std::map<int, double> util, int64_t intervalMs = 5 * kS) {
  model::Telemetry t;
  t.host = "gpu-a";
  t.at = agentAt;
  t.intervalMs = intervalMs;
  for (auto [index, pct] : util) {
    model::GpuSample s;
    s.index = index;
    s.utilizationPct = pct;
    t.gpus.push_back(s);
  }
  return t;
}

struct Collected {
  std::map<int64_t, UsageCell> byAlloc;
  std::function<void(int64_t, const UsageCell&)> fn() {
    return [this](int64_t a, const UsageCell& c) { byAlloc[a] += c; };
  }
};

TEST(UsageAttributor, EachSampleCoversTheSpanSinceTheLastAndIsSplitByMinute) {
  UsageAttributor a(5);
  a.onLedger(openEntry(1, "gpu-a", {0, 1}, 1000, kT0));
  Collected got;
  // The agent's clock runs 7 hours off; only the 5 s between its samples matter.
  const TimeMs skew = 7 * 3600 * kS;
  for (int i = 1; i <= 14; ++i) {
    a.addRound("gpu-a", round(kT0 + skew + i * 5 * kS, {{0, 50}, {1, 100}}), kT0 + i * 5 * kS,
               got.fn());
  }
  // 70 s on two GPUs: one at half, one full.
  EXPECT_EQ(got.byAlloc[1].measured, 2 * 70 * kS * 1000);
  EXPECT_EQ(got.byAlloc[1].used, 70 * kS * 500 + 70 * kS * 1000);
  EXPECT_EQ(got.byAlloc[1].idle, 0);
  auto batch = a.drain();
  ASSERT_EQ(batch.usage.size(), 2u);  // minutes 0 and 1
  EXPECT_EQ(batch.usage[0].minute, kT0);
  EXPECT_EQ(batch.usage[0].cell.measured, 2 * 60 * kS * 1000);
  EXPECT_EQ(batch.usage[1].cell.measured, 2 * 10 * kS * 1000);
  EXPECT_EQ(batch.samples.size(), 28u);
  EXPECT_EQ(batch.gpuMinutes.size(), 4u);  // two GPUs, two minutes
  EXPECT_TRUE(a.drain().empty());
}

TEST(UsageAttributor, FractionsWeighAndIdleSamplesCountAsIdle) {
  UsageAttributor a(5);
  a.onLedger(openEntry(1, "gpu-a", {0}, 250, kT0));
  a.onLedger(openEntry(2, "gpu-a", {0}, 500, kT0));
  Collected got;
  a.addRound("gpu-a", round(kT0 + 5 * kS, {{0, 2}}), kT0 + 5 * kS, got.fn());
  EXPECT_EQ(got.byAlloc[1].measured, 5 * kS * 250);
  EXPECT_EQ(got.byAlloc[1].idle, 5 * kS * 250);
  EXPECT_EQ(got.byAlloc[2].measured, 5 * kS * 500);
  EXPECT_EQ(got.byAlloc[2].used, 5 * kS * 500 * 2 / 100);
}

TEST(UsageAttributor, HoldsStartAndEndWhereTheLedgerSays) {
  UsageAttributor a(5);
  a.onLedger(openEntry(1, "gpu-a", {0}, 1000, kT0 + 3 * kS));
  Collected got;
  a.addRound("gpu-a", round(kT0 + 5 * kS, {{0, 100}}), kT0 + 5 * kS, got.fn());
  EXPECT_EQ(got.byAlloc[1].measured, 2 * kS * 1000);  // held from 3 s, the sample covers 0-5 s
  a.onLedger(closeEntry(2, 1, kT0 + 7 * kS));
  a.addRound("gpu-a", round(kT0 + 10 * kS, {{0, 100}}), kT0 + 10 * kS, got.fn());
  EXPECT_EQ(got.byAlloc[1].measured, 4 * kS * 1000);
  // A repeated sample adds nothing; a GPU nobody holds adds to nobody.
  a.addRound("gpu-a", round(kT0 + 10 * kS, {{0, 100}}), kT0 + 10 * kS + 100, got.fn());
  a.addRound("gpu-a", round(kT0 + 15 * kS, {{3, 100}}), kT0 + 15 * kS, got.fn());
  EXPECT_EQ(got.byAlloc[1].measured, 4 * kS * 1000);
  EXPECT_EQ(got.byAlloc.size(), 1u);
  EXPECT_EQ(a.drain().samples.size(), 3u);  // the repeat is not stored either
}

// Allocation 1 holds GPU 0 of gpu-a, whole, from kT0; the agent samples every 5 s.
class OneWholeGpuHeld : public ::testing::Test {
 protected:
  void SetUp() override { a.onLedger(openEntry(1, "gpu-a", {0}, 1000, kT0)); }
  // GPU 0 fully used in a round the agent stamped `agentAt`, arriving at `receivedAt`.
  void fullUse(TimeMs agentAt, TimeMs receivedAt) {
    a.addRound("gpu-a", round(agentAt, {{0, 100}}), receivedAt, got.fn());
  }

  UsageAttributor a{5};
  Collected got;
};

TEST_F(OneWholeGpuHeld, AGapLongerThanThreeIntervalsCountsOnlyOneInterval) {
  fullUse(kT0 + 5 * kS, kT0 + 5 * kS);
  // The agent was away for a minute: the time it did not sample is not claimed as measured.
  fullUse(kT0 + 65 * kS, kT0 + 65 * kS);
  EXPECT_EQ(got.byAlloc[1].measured, 10 * kS * 1000);
}

TEST_F(OneWholeGpuHeld, AnAgentClockSteppingBackCountsOneInterval) {
  fullUse(kT0 + 50 * kS, kT0 + 5 * kS);
  fullUse(kT0 + 2 * kS, kT0 + 10 * kS);
  fullUse(kT0 + 7 * kS, kT0 + 15 * kS);
  EXPECT_EQ(got.byAlloc[1].measured, 15 * kS * 1000);
}

TEST_F(OneWholeGpuHeld, PendingUseInsideAWindowIsProratedByMinute) {
  for (int i = 1; i <= 24; ++i)
    a.addRound("gpu-a", round(kT0 + i * 5 * kS, {{0, 100}}), kT0 + i * 5 * kS, nullptr);
  EXPECT_EQ(a.pendingWithin(1, kT0, kT0 + 120 * kS).measured, 120 * kS * 1000);
  EXPECT_EQ(a.pendingWithin(1, kT0 + 30 * kS, kT0 + 90 * kS).measured, 60 * kS * 1000);
  EXPECT_EQ(a.pendingWithin(2, kT0, kT0 + 120 * kS).measured, 0);
}

}  // namespace
}  // namespace allot::telemetry
