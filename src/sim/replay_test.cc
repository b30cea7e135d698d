#include "sim/replay.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace allot::sim {
namespace {

namespace fs = std::filesystem;
namespace pl = sched::placement;

constexpr TimeMs kS = 1000;

// One task of a hand-made trace: team, arrival and runtime in seconds, GPUs (milli per GPU).
ReplayTask task(int id, int team, int64_t arrivalS, int64_t runtimeS, int gpus, int gpuMilli = 1000,
                bool preemptible = false) {
  ReplayTask t;
  t.name = "p" + std::to_string(id);
  t.team = team;
  t.arrivalMs = arrivalS * kS;
  t.runtimeMs = runtimeS * kS;
  t.request.id = id;
  t.request.team = "team" + std::to_string(team);
  t.request.preemptible = preemptible;
  t.request.submittedAt = t.arrivalMs;
  t.request.gpus = gpus;
  t.request.gpuMilli = gpuMilli;
  t.request.cpuMillis = 1000;
  t.request.memoryMib = 1024;
  return t;
}

std::vector<sched::HostView> oneHost(int gpus, int64_t cpuMilli = 64000) {
  return replayHosts({{"h0", cpuMilli, 262144, gpus, "V100M32"}});
}

ReplayTrace traceOf(std::vector<ReplayTask> tasks, int64_t endS) {
  ReplayTrace t;
  t.tasks = std::move(tasks);
  t.endMs = endS * kS;
  return t;
}

TEST(ReplayTest, WaitsForRoomAndMeasuresDelayAndUtilisation) {
  // Two GPUs: a two-GPU task holds both for 100 s, so the one-GPU task that arrives at 10 s
  // starts at 100 s (delay 90) and ends at 150 s. A half-GPU task arriving at 120 s shares.
  ReplayOptions o;
  o.teams = 1;
  o.guaranteeShare = 1.0;
  o.sampleMs = 50 * kS;
  auto r = runReplay(
      oneHost(2),
      traceOf({task(1, 0, 0, 100, 2), task(2, 0, 10, 50, 1), task(3, 0, 120, 10, 1, 500)}, 150), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->endMs, 150 * kS);
  EXPECT_EQ(r->overall.placed, 3);
  EXPECT_EQ(r->overall.completed, 3);
  EXPECT_EQ(r->overall.delay.count, 3);
  EXPECT_DOUBLE_EQ(r->overall.delay.meanS, 30.0);  // 0, 90, 0
  EXPECT_DOUBLE_EQ(r->overall.delay.p50S, 0.0);
  EXPECT_DOUBLE_EQ(r->overall.delay.p99S, 90.0);
  EXPECT_DOUBLE_EQ(r->overall.delay.maxS, 90.0);
  // 100% for 100 s, 50% for 20 s, 75% for 10 s, 50% for 20 s.
  EXPECT_NEAR(r->meanUtilisation, (100.0 * 100 + 50 * 20 + 75 * 10 + 50 * 20) / 150, 1e-9);
  EXPECT_EQ(r->utilisation, (std::vector<double>{100, 100, 50, 0}));  // at 0, 50, 100, 150 s
  // Service within the trace: task 2 wanted 50 GPU-s from 10 s, got it from 100 s (all inside).
  EXPECT_DOUBLE_EQ(r->overall.gpuSecondsDemanded, 200 + 50 + 5);
  EXPECT_DOUBLE_EQ(r->overall.gpuSecondsReceived, 200 + 50 + 5);
  EXPECT_EQ(r->overall.requeued + r->overall.killed + r->overall.neverPlaced, 0);
}

// Team 0 borrows the whole 4-GPU host (2 GPUs guaranteed each); team 1's task arrives within
// its guarantee and takes one back.
Result<ReplayResult> replayBorrowThenReclaim(bool preemptible, TimeMs graceMs = 0) {
  ReplayOptions o;
  o.teams = 2;
  o.guaranteeShare = 1.0;
  o.graceMs = graceMs;
  return runReplay(
      oneHost(4),
      traceOf({task(1, 0, 0, 1000, 1, 1000, preemptible), task(2, 0, 0, 1000, 1, 1000, preemptible),
               task(3, 0, 0, 1000, 1, 1000, preemptible), task(4, 0, 0, 1000, 1, 1000, preemptible),
               task(5, 1, 100, 100, 1)},
              1000),
      o);
}

TEST(ReplayTest, AGuaranteeReclaimsBorrowedWorkWhichRequeuesAndRestarts) {
  auto r = replayBorrowThenReclaim(true);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->teams[0].requeued, 1);
  EXPECT_EQ(r->teams[0].killed, 0);
  EXPECT_EQ(r->teams[0].completed, 4);
  EXPECT_EQ(r->teams[1].delay.p99S, 0);  // grace 0: the victim leaves before the next pass
  EXPECT_EQ(r->teams[1].completed, 1);
  EXPECT_EQ(r->placements, 6);  // the victim starts again, from scratch, when team 1 is done
  EXPECT_EQ(r->endMs, 1200 * kS);
  EXPECT_DOUBLE_EQ(r->teams[0].delay.meanS, 0);  // delay counts the first placement
  // Within [0, 1000 s]: team 0 wanted 4000 GPU-s and held 4 GPUs, 3 during 100..200 s.
  EXPECT_DOUBLE_EQ(r->teams[0].gpuSecondsDemanded, 4000);
  EXPECT_DOUBLE_EQ(r->teams[0].gpuSecondsReceived, 3900);
  EXPECT_DOUBLE_EQ(r->teams[1].serviceRatio, 1.0);
  EXPECT_NEAR(r->jain, (1.975 * 1.975) / (2 * (0.975 * 0.975 + 1)), 1e-12);
}

TEST(ReplayTest, ReclaimingNonPreemptibleWorkKillsIt) {
  auto r = replayBorrowThenReclaim(false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->teams[0].requeued, 0);
  EXPECT_EQ(r->teams[0].killed, 1);
  EXPECT_EQ(r->teams[0].completed, 3);
  EXPECT_EQ(r->placements, 5);
  EXPECT_EQ(r->endMs, 1000 * kS);
}

TEST(ReplayTest, AGracePeriodDelaysTheReclaimingTask) {
  auto r = replayBorrowThenReclaim(true, 30 * kS);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->teams[0].requeued, 1);
  EXPECT_DOUBLE_EQ(r->teams[1].delay.meanS, 30);
  EXPECT_EQ(r->endMs, 1230 * kS);
}

TEST(ReplayTest, ReportsTasksThatCanNeverBePlaced) {
  ReplayOptions o;
  o.teams = 1;
  ReplayTask otherModel = task(2, 0, 0, 10, 1);
  otherModel.request.models = {"A100"};
  ReplayTask tooMuchCpu = task(3, 0, 0, 10, 1);
  tooMuchCpu.request.cpuMillis = 128000;
  auto r = runReplay(oneHost(2), traceOf({task(1, 0, 0, 10, 1), otherModel, tooMuchCpu}, 10), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->overall.completed, 1);
  EXPECT_EQ(r->overall.neverPlaced, 2);
  EXPECT_EQ(r->impossible, 2);  // no such model, no host with that CPU: out of the queue at once
}

TEST(ReplayTest, JainIndex) {
  EXPECT_DOUBLE_EQ(jainIndex({1, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(jainIndex({1, 0}), 0.5);
  EXPECT_DOUBLE_EQ(jainIndex({1, 0.5}), 2.25 / 2.5);
  EXPECT_DOUBLE_EQ(jainIndex({}), 1.0);
}

TEST(ReplayTest, SameInputSameOutput) {
  // A busy little fleet: 3 hosts, 40 tasks of mixed shapes and teams, every policy twice.
  std::vector<sched::HostView> hosts = replayHosts({{"a", 32000, 131072, 4, "T4"},
                                                    {"b", 32000, 131072, 2, "T4"},
                                                    {"c", 64000, 262144, 8, "P100"}});
  std::vector<ReplayTask> tasks;
  for (int i = 0; i < 40; ++i) {
    const int gpus = i % 7 == 0 ? 4 : (i % 3 == 0 ? 2 : 1);
    const int milli = gpus == 1 && i % 2 == 0 ? 250 + 50 * (i % 5) : 1000;
    tasks.push_back(
        task(i + 1, i % 3, (i * 37) % 300, 50 + (i * 53) % 400, gpus, milli, i % 4 == 0));
  }
  const ReplayTrace trace = traceOf(tasks, 600);
  for (const char* policy : {"fgd", "bestfit", "firstfit", "random"}) {
    ReplayOptions o;
    o.teams = 3;
    o.policy = policy;
    o.sampleMs = 10 * kS;
    auto a = runReplay(hosts, trace, o);
    auto b = runReplay(hosts, trace, o);
    ASSERT_TRUE(a.ok() && b.ok()) << policy;
    EXPECT_GT(a->overall.delay.meanS, 0) << policy << ": the test should make tasks wait";
    EXPECT_EQ(a->utilisation, b->utilisation) << policy;
    EXPECT_EQ(a->passes, b->passes) << policy;
    EXPECT_EQ(a->endMs, b->endMs) << policy;
    EXPECT_EQ(a->jain, b->jain) << policy;
    for (size_t t = 0; t < a->teams.size(); ++t) {
      EXPECT_EQ(a->teams[t].delay.meanS, b->teams[t].delay.meanS) << policy;
      EXPECT_EQ(a->teams[t].requeued, b->teams[t].requeued) << policy;
      EXPECT_EQ(a->teams[t].gpuSecondsReceived, b->teams[t].gpuSecondsReceived) << policy;
    }
  }
}

TEST(ReplayTest, RejectsBadOptions) {
  ReplayOptions o;
  o.teams = 0;
  EXPECT_FALSE(runReplay(oneHost(1), traceOf({}, 0), o).ok());
  o.teams = 1;
  o.policy = "worstfit";
  EXPECT_FALSE(runReplay(oneHost(1), traceOf({}, 0), o).ok());
  o.policy = "fgd";
  o.guaranteeShare = 1.5;
  EXPECT_FALSE(runReplay(oneHost(1), traceOf({}, 0), o).ok());
}

class ReplayTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() /
        ("allot_replay_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<TraceTask> pods(const std::string& text) {
    auto p = dir_ / "pods.csv";
    std::ofstream(p) << text;
    auto r = loadTasks(p.string());
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : std::vector<TraceTask>{};
  }
  fs::path dir_;
};

TEST_F(ReplayTraceTest, RuntimesTeamsAndPreemptibility) {
  auto rows = pods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "a,1000,1024,1,460,,LS,Running,0,100,10\n"       // ran 90 s
      "b,1000,1024,2,1000,P100|T4,BE,Pending,5,50,\n"  // never placed for real: lived 45 s
      "c,1000,1024,0,0,,BE,Running,20,,30\n"           // no deletion: to the end (1000 s)
      "d,1000,1024,1,1000,,Burstable,Running,30,1000,40\n");
  auto t = buildReplayTrace(rows, nullptr, 3);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->tasks.size(), 4u);
  EXPECT_EQ(t->endMs, 1000 * kS);
  EXPECT_EQ(t->tasks[0].runtimeMs, 90 * kS);
  EXPECT_EQ(t->tasks[1].runtimeMs, 45 * kS);
  EXPECT_EQ(t->tasks[2].runtimeMs, 980 * kS);
  EXPECT_EQ(t->tasks[3].runtimeMs, 960 * kS);
  EXPECT_EQ(t->tasks[1].arrivalMs, 5 * kS);
  EXPECT_EQ(
      (std::vector<int>{t->tasks[0].team, t->tasks[1].team, t->tasks[2].team, t->tasks[3].team}),
      (std::vector<int>{0, 1, 2, 0}));
  EXPECT_EQ(t->tasks[3].request.team, "team0");
  EXPECT_FALSE(t->tasks[0].request.preemptible);
  EXPECT_TRUE(t->tasks[1].request.preemptible);
  EXPECT_EQ(t->tasks[0].request.gpuMilli, 460);
  EXPECT_EQ(t->tasks[1].request.models, (std::vector<std::string>{"P100", "T4"}));
  EXPECT_EQ(t->tasks[2].request.gpus, 0);
  EXPECT_EQ(t->tasks[2].request.gpuMilli, 1000);
}

TEST_F(ReplayTraceTest, RowsWithoutTimesBorrowThemByName) {
  auto untimed = pods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
      "a,1000,1024,1,1000\n"
      "extra,1000,1024,8,1000\n");
  auto missing = buildReplayTrace(untimed, nullptr, 4);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no creation_time"), std::string::npos);
  auto times = pods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos,creation_time,deletion_time,"
      "scheduled_time\n"
      "z,1,1,0,0,LS,7,9,8\n"
      "a,1,1,0,0,BE,3,30,10\n");
  auto t = buildReplayTrace(untimed, &times, 4);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->timesBorrowed, 2);
  EXPECT_EQ(t->timesHashed, 1);
  EXPECT_EQ(t->tasks[0].arrivalMs, 3 * kS);
  EXPECT_EQ(t->tasks[0].runtimeMs, 20 * kS);
  EXPECT_TRUE(t->tasks[0].request.preemptible);
  EXPECT_EQ(t->tasks[1].request.gpus, 8);  // resources stay the pod list's
}

TEST(ReplayNodesTest, NodeFractionKeepsEveryModel) {
  std::vector<pl::NodeSpec> nodes;
  for (int i = 0; i < 10; ++i) nodes.push_back({"t" + std::to_string(i), 1, 1, 4, "T4"});
  nodes.push_back({"p0", 1, 1, 2, "P100"});
  auto kept = nodeFraction(nodes, 0.2);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].name, "t4");
  EXPECT_EQ(kept[1].name, "t9");
  EXPECT_EQ(kept[2].name, "p0");
  auto hosts = replayHosts(kept);
  ASSERT_EQ(hosts[0].gpus.size(), 4u);
  EXPECT_TRUE(hosts[0].gpus[3].shared);
  EXPECT_EQ(hosts[0].gpus[3].model, "T4");
}

}  // namespace
}  // namespace allot::sim
