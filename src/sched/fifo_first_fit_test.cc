#include <gtest/gtest.h>

#include "sched/scheduler.h"

namespace allot::sched {
namespace {

HostView host(const std::string& name, int gpus, const std::string& model = "A100") {
  HostView h{name, true, {}};
  for (int i = 0; i < gpus; ++i) h.gpus.push_back({i, model, true});
  return h;
}

TEST(FifoFirstFit, PlacesOnDisjointGpus) {
  Snapshot s;
  s.hosts = {host("a", 4)};
  s.pending = {{1, 2, "", 0}, {2, 2, "", 0}, {3, 1, "", 0}};
  auto d = FifoFirstFitScheduler().decide(s);
  ASSERT_EQ(d.placements.size(), 2u);
  EXPECT_EQ(d.placements[0].gpuIndices, (std::vector<int>{0, 1}));
  EXPECT_EQ(d.placements[1].gpuIndices, (std::vector<int>{2, 3}));
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].jobId, 3);
  EXPECT_EQ(d.waits[0].position, 1);
}

TEST(FifoFirstFit, TooBigForAnyHostSaysSo) {
  Snapshot s;
  s.hosts = {host("a", 4), host("b", 8)};
  s.pending = {{1, 16, "", 0}, {2, 1, "", 0}};
  auto d = FifoFirstFitScheduler().decide(s);
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_NE(describeWait(d.waits[0], 16, "").find("no host has 16"), std::string::npos);
  // An impossible job does not block the queue forever.
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].jobId, 2);
}

TEST(FifoFirstFit, HeadBlocksTheRest) {
  Snapshot s;
  s.hosts = {host("a", 2)};
  s.hosts[0].gpus[0].free = false;
  s.pending = {{1, 2, "", 0}, {2, 1, "", 0}};
  auto d = FifoFirstFitScheduler().decide(s);
  EXPECT_TRUE(d.placements.empty());
  ASSERT_EQ(d.waits.size(), 2u);
  EXPECT_NE(describeWait(d.waits[1], 1, "").find("behind job 1"), std::string::npos);
  EXPECT_EQ(d.waits[1].position, 2);
}

TEST(FifoFirstFit, RespectsModelAndSkipsOfflineHosts) {
  Snapshot s;
  s.hosts = {host("a", 8, "A100"), host("b", 8, "H100")};
  s.hosts[1].schedulable = false;
  s.pending = {{1, 1, "H100", 0}, {2, 1, "V100", 0}};
  auto d = FifoFirstFitScheduler().decide(s);
  EXPECT_TRUE(d.placements.empty());
  ASSERT_EQ(d.waits.size(), 2u);
  EXPECT_NE(describeWait(d.waits[1], 1, "V100").find("no host has V100"), std::string::npos);
}

TEST(FifoFirstFit, CpuOnlyJobsNeedAnOnlineHost) {
  Snapshot s;
  s.pending = {{1, 0, "", 0}};
  auto d = FifoFirstFitScheduler().decide(s);
  ASSERT_EQ(d.waits.size(), 1u);
  s.hosts = {host("a", 0)};
  d = FifoFirstFitScheduler().decide(s);
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].host, "a");
}

TEST(FifoFirstFit, EmptyFleetSaysNoHostJoined) {
  Snapshot s;
  s.pending = {{1, 2, "", 0}};
  auto d = FifoFirstFitScheduler().decide(s);
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].kind, WaitKind::kNoHosts);
  EXPECT_EQ(describeWait(d.waits[0], 2, ""), "no host has joined the cluster yet");
}

TEST(FifoFirstFit, TooBigCountsOnlyTheWantedModel) {
  Snapshot s;
  s.hosts = {host("a", 8, "A100"), host("b", 2, "H100")};
  s.pending = {{1, 4, "H100", 0}};
  auto d = FifoFirstFitScheduler().decide(s);
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].kind, WaitKind::kTooBig);
  EXPECT_EQ(describeWait(d.waits[0], 4, "H100"), "no host has 4 H100 GPUs (the largest has 2)");
}

TEST(FifoFirstFit, IsDeterministic) {
  Snapshot s;
  s.hosts = {host("b", 4), host("a", 4)};
  for (int i = 0; i < 10; ++i) s.pending.push_back({i, 1 + i % 3, "", 0});
  auto d1 = FifoFirstFitScheduler().decide(s);
  auto d2 = FifoFirstFitScheduler().decide(s);
  ASSERT_EQ(d1.placements.size(), d2.placements.size());
  for (size_t i = 0; i < d1.placements.size(); ++i) {
    EXPECT_EQ(d1.placements[i].host, d2.placements[i].host);
    EXPECT_EQ(d1.placements[i].gpuIndices, d2.placements[i].gpuIndices);
  }
}

}  // namespace
}  // namespace allot::sched
