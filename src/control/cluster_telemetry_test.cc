// Live GPU telemetry: what agents may report, and how long a reading counts as current.
#include <gtest/gtest.h>

#include "control/cluster.h"
#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

model::Telemetry round(const std::string& host, std::vector<int> gpus, double util) {
  model::Telemetry t;
  t.host = host;
  t.at = 1'700'000'000'000;
  t.intervalMs = 1000;
  for (int g : gpus) {
    model::GpuSample s;
    s.index = g;
    s.utilizationPct = util;
    s.memoryUsedMib = 2048;
    t.gpus.push_back(s);
  }
  return t;
}

TEST_F(ClusterTest, TelemetryKeepsTheLatestSamplePerGpu) {
  joinHost("gpu-01", 2);
  ASSERT_TRUE(cluster_->agentTelemetry("gpu-01", round("gpu-01", {0, 1}, 10)).ok());
  clock_.advance(1000);
  ASSERT_TRUE(cluster_->agentTelemetry("gpu-01", round("gpu-01", {1}, 70)).ok());
  const World& w = cluster_->world();
  const auto* g1 = w.freshTelemetry("gpu-01", 1, clock_.nowMs());
  ASSERT_NE(g1, nullptr);
  EXPECT_EQ(g1->sample.utilizationPct, 70.0);
  EXPECT_EQ(g1->receivedAt, clock_.nowMs());
  const auto* g0 = w.freshTelemetry("gpu-01", 0, clock_.nowMs());
  ASSERT_NE(g0, nullptr);
  EXPECT_EQ(g0->sample.utilizationPct, 10.0);
}

TEST_F(ClusterTest, TelemetryOlderThanThreeIntervalsIsNotCurrent) {
  joinHost("gpu-01", 1);
  ASSERT_TRUE(cluster_->agentTelemetry("gpu-01", round("gpu-01", {0}, 50)).ok());
  clock_.advance(2999);
  EXPECT_NE(cluster_->world().freshTelemetry("gpu-01", 0, clock_.nowMs()), nullptr);
  clock_.advance(1);
  EXPECT_EQ(cluster_->world().freshTelemetry("gpu-01", 0, clock_.nowMs()), nullptr);
}

TEST_F(ClusterTest, TelemetryNamingAnotherHostIsRejectedAndNothingKept) {
  joinHost("gpu-01", 2);
  joinHost("gpu-02", 2);
  auto st = cluster_->agentTelemetry("gpu-01", round("gpu-02", {0}, 99));
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_TRUE(cluster_->world().telemetry.empty());
}

TEST_F(ClusterTest, TelemetryForAGpuTheHostLacksIsRejectedWhole) {
  joinHost("gpu-01", 2);
  auto st = cluster_->agentTelemetry("gpu-01", round("gpu-01", {0, 7}, 99));
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("GPU 7"), std::string::npos) << st.message();
  EXPECT_TRUE(cluster_->world().telemetry.empty());  // not even GPU 0's reading
}

// Attack: a host's credential flooding allotd with telemetry, each sample a row in telemetry.db
// and work on the I/O thread: an interval no agent may have (1 ms lets every round through; 2^40
// makes each cover every minute of every hold), the same GPU many times in one round, rounds as
// fast as the link carries them. Each is refused whole, and what was taken in stays.
TEST_F(ClusterTest, TelemetryNoAgentWouldSendIsRefusedWhole) {
  joinHost("gpu-01", 2);
  for (int64_t interval : {int64_t{1}, int64_t{999}, int64_t{1} << 40}) {
    auto t = round("gpu-01", {0}, 99);
    t.intervalMs = interval;
    EXPECT_EQ(cluster_->agentTelemetry("gpu-01", t).code(), Code::kInvalidArgument) << interval;
  }
  auto twice = cluster_->agentTelemetry("gpu-01", round("gpu-01", {0, 1, 0}, 99));
  EXPECT_EQ(twice.code(), Code::kInvalidArgument);
  EXPECT_NE(twice.message().find("GPU 0 twice"), std::string::npos) << twice.message();
  EXPECT_TRUE(cluster_->world().telemetry.empty());

  // A few rounds at once pass (an agent's, delivered late while allotd was busy); a stream of
  // them is held to two a second, whichever GPUs each names.
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(cluster_->agentTelemetry("gpu-01", round("gpu-01", {0, 1}, 10)).ok()) << i;
  EXPECT_EQ(cluster_->agentTelemetry("gpu-01", round("gpu-01", {1}, 99)).code(),
            Code::kFailedPrecondition);
  EXPECT_EQ(cluster_->agentTelemetry("gpu-01", round("gpu-01", {0}, 99)).code(),
            Code::kFailedPrecondition);
  clock_.advance(499);
  EXPECT_EQ(cluster_->agentTelemetry("gpu-01", round("gpu-01", {1}, 99)).code(),
            Code::kFailedPrecondition);
  EXPECT_EQ(cluster_->world().freshTelemetry("gpu-01", 1, clock_.nowMs())->sample.utilizationPct,
            10.0);
  clock_.advance(1);
  EXPECT_TRUE(cluster_->agentTelemetry("gpu-01", round("gpu-01", {1}, 99)).ok())
      << "half a second later, room for one more round";
  EXPECT_EQ(cluster_->agentTelemetry("gpu-01", round("gpu-01", {0}, 99)).code(),
            Code::kFailedPrecondition);
  for (int i = 0; i < 10; ++i) {
    clock_.advance(500);
    EXPECT_TRUE(cluster_->agentTelemetry("gpu-01", round("gpu-01", {0, 1}, 20)).ok())
        << "two rounds a second, sustained: " << i;
  }
  // Another host has a pace of its own.
  joinHost("gpu-02", 1);
  EXPECT_TRUE(cluster_->agentTelemetry("gpu-02", round("gpu-02", {0}, 30)).ok());
}

TEST_F(ClusterTest, AllocationsNameProjectAndSince) {
  joinHost("gpu-01", 2);
  int64_t a = submit(alice_, 1);
  auto pass = cluster_->schedulePass();
  cluster_->passDurable(pass.value);
  auto allocs = cluster_->hosts().allocations(admin_, "gpu-01");
  ASSERT_EQ(allocs.size(), 1u);
  EXPECT_EQ(allocs[0].jobId, a);
  EXPECT_EQ(allocs[0].team, "vision");
  EXPECT_EQ(allocs[0].project, cluster_->getJob(alice_, a)->project);
  EXPECT_EQ(allocs[0].since, clock_.nowMs());
  EXPECT_EQ(allocs[0].gpuMilli, 1000);
}

}  // namespace
}  // namespace allot::control
