// The allocation ledger through the control plane: a scripted scenario on a FakeClock whose every
// change is committed to a real SqliteStore, with an allotd restart in the middle, checked to the
// exact GPU-millisecond; the same for the use GPU samples measured, kept in a real telemetry.db;
// and the usage report's grouping, clipping and peak on a hand-built index.

#include <gtest/gtest.h>

#include <filesystem>

#include "common/secrets.h"
#include "control/cluster.h"
#include "control/cluster_test_fixture.h"
#include "control/testsupport/ledger_entries.h"
#include "control/usage_report.h"
#include "store/sqlite/sqlite_store.h"
#include "telemetry/telemetry_store.h"

namespace allot::control {
namespace {

using model::LedgerKind;

class LedgerScenarioTest : public DurableClusterTest {
 protected:
  void SetUp() override {
    DurableClusterTest::SetUp();
    start();
    bootstrap({"vision", "nlp"});
    alice_ = keepUser("alice", "vision", model::Role::kMember);
    bob_ = keepUser("bob", "nlp", model::Role::kMember);
    QuotaUpdate q;
    q.guaranteed = std::map<std::string, int>{{"", 2}};
    keep(cluster_->quotas().setTeam(admin_, "nlp", q));
    for (const char* h : {"gpu-a", "gpu-b"}) keepJoinedHost(h, 2);
  }
  void TearDown() override {
    cluster_.reset();
    telemetry_.reset();
    DurableClusterTest::TearDown();
  }

  // allotd stopping, as Server does (what is attributed goes to telemetry.db), and starting
  // (again) from what both stores hold.
  void start() {
    if (cluster_ && telemetry_) telemetry_->submit(cluster_->accounting().drainTelemetry());
    telemetry_.reset();
    ClusterOptions opts = testOptions();
    opts.lostAfterMs = 60 * kS;
    DurableClusterTest::start(opts);
    auto t = telemetry::TelemetryStore::open((dir_ / "telemetry.db").string(), {}, clock_);
    ASSERT_TRUE(t.ok()) << t.status().toString();
    telemetry_ = std::move(t).value();
    auto totals = telemetry_->loadTotals();
    ASSERT_TRUE(totals.ok());
    cluster_->accounting().loadUsageTotals(*totals);
    cluster_->accounting().setUsageHistory([this](int64_t seq, TimeMs from, TimeMs to) {
      return telemetry_->usageWithin(seq, from, to);
    });
  }

  void place() {
    auto pass = keep(cluster_->schedulePass());
    cluster_->passDurable(pass.value);
  }
  // Alice's 2-GPU `python train.py`, submitted and placed; its id.
  int64_t placeTraining() {
    const int64_t id =
        keep(cluster_->submitJob(alice_, request({"python", "train.py"}, 2))).value.id;
    place();
    return id;
  }
  // A gang's rank 0 reports the rendezvous port it chose with its first report (without one the
  // gang fails): every report here carries one, which other jobs ignore.
  void report(const std::string& host, int64_t id, ActualState state,
              std::optional<int> code = {}) {
    ActualJob a{id, state, 1, code, {}, clock_.nowMs(), 0, ""};
    a.masterPort = 29500;
    keep(cluster_->agentStatus(host, {a}));
  }
  std::map<std::string, int64_t> milliGpuMs(UsageBy by, TimeMs from, TimeMs to) {
    std::map<std::string, int64_t> out;
    for (const auto& r :
         usageReport(cluster_->world().ledger, {by, from, to, clock_.nowMs(), ""})) {
      out[r.name] = r.milliGpuMs;
    }
    return out;
  }

  std::unique_ptr<telemetry::TelemetryStore> telemetry_;
  Principal alice_, bob_;
};

// Two hosts of two GPUs; nlp is guaranteed two. GPU-seconds by the script:
//   gang (alice, 2 ranks x 2 GPUs), placed at 0, preempted, stopped at 130: 4 x 130 = 520
//   claim (bob, 2 GPUs), placed at 130, allotd restarts at 200, succeeds at 400: 2 x 270 = 540
//   gang again from 400; gpu-b last heard from at 500 and declared lost at 561:
//     rank on gpu-b 2 x 100 = 200 (corrected to when it was last seen), the other 2 x 161 = 322
TEST_F(LedgerScenarioTest, GpuSecondsAreExactThroughPreemptionRestartAndALostHost) {
  const TimeMs t0 = clock_.nowMs();
  JobRequest gangReq;
  gangReq.command = {"torchrun", "train.py"};
  gangReq.resources.gpus = 2;
  gangReq.resources.hosts = 2;
  gangReq.preemptible = true;
  gangReq.project = "";
  const int64_t gang = keep(cluster_->submitJob(alice_, gangReq)).value.id;
  place();
  ASSERT_EQ(job(gang).state, JobState::kScheduled);
  report("gpu-a", gang, ActualState::kRunning);
  report("gpu-b", gang, ActualState::kRunning);

  clock_.advance(100 * kS);
  JobRequest claimReq;
  claimReq.command = {"python", "eval.py"};
  claimReq.resources.gpus = 2;
  const int64_t claim = keep(cluster_->submitJob(bob_, claimReq)).value.id;
  place();
  ASSERT_TRUE(job(gang).evicting);
  clock_.advance(30 * kS);
  report("gpu-a", gang, ActualState::kExited, 143);
  report("gpu-b", gang, ActualState::kExited, 143);
  ASSERT_EQ(job(gang).state, JobState::kQueued);
  place();
  ASSERT_EQ(job(claim).state, JobState::kScheduled);
  const std::string claimHost = firstRank(job(claim)).host;
  report(claimHost, claim, ActualState::kRunning);

  clock_.advance(70 * kS);
  start();  // allotd restarts: the world, ledger included, comes back from the store
  EXPECT_EQ(milliGpuMs(UsageBy::kTeam, t0, clock_.nowMs()),
            (std::map<std::string, int64_t>{{"nlp", 2 * 70 * kS * 1000},
                                            {"vision", 4 * 130 * kS * 1000}}));
  for (const char* h : {"gpu-a", "gpu-b"}) {
    std::vector<ActualJob> actual;
    if (h == claimHost) actual.push_back({claim, ActualState::kRunning, 1, {}, {}, t0, 0, ""});
    keep(cluster_->agentConnected(h, &link_, inventory(2), actual));
  }

  clock_.advance(200 * kS);
  report(claimHost, claim, ActualState::kExited, 0);
  ASSERT_EQ(job(claim).state, JobState::kSucceeded);
  place();
  ASSERT_EQ(job(gang).state, JobState::kScheduled);
  report("gpu-a", gang, ActualState::kRunning);
  clock_.advance(100 * kS);
  report("gpu-a", gang, ActualState::kRunning);
  report("gpu-b", gang, ActualState::kRunning);
  cluster_->agentDisconnected("gpu-b", &link_);
  clock_.advance(61 * kS);
  report("gpu-a", gang, ActualState::kRunning);
  keep(cluster_->checkLiveness());
  ASSERT_EQ(job(gang).state, JobState::kLost);

  const TimeMs end = clock_.nowMs();
  clock_.advance(3600 * kS);  // nothing is held any more: later reports add nothing
  for (int pass = 0; pass < 2; ++pass) {
    EXPECT_EQ(milliGpuMs(UsageBy::kTeam, t0, clock_.nowMs()),
              (std::map<std::string, int64_t>{{"nlp", 540 * kS * 1000},
                                              {"vision", (520 + 200 + 322) * kS * 1000}}));
    EXPECT_EQ(
        milliGpuMs(UsageBy::kUser, t0, end),
        (std::map<std::string, int64_t>{{"alice", 1042 * kS * 1000}, {"bob", 540 * kS * 1000}}));
    auto hosts = milliGpuMs(UsageBy::kHost, t0, end);
    EXPECT_EQ(hosts["gpu-a"] + hosts["gpu-b"], 1582 * kS * 1000);
    EXPECT_EQ(milliGpuMs(UsageBy::kGpuModel, t0, end),
              (std::map<std::string, int64_t>{{"A100", 1582 * kS * 1000}}));
    start();  // and the same after another restart
  }

  // The store holds the history as appended entries: 2 opens + 2 closes for the first placement,
  // 1 + 1 for the claim, 2 + 2 for the second, and one correction for the rank on gpu-b.
  auto contents = store_->loadAll();
  ASSERT_TRUE(contents.ok());
  std::map<LedgerKind, int> kinds;
  for (const auto& e : contents->ledger) ++kinds[e.kind];
  EXPECT_EQ(kinds[LedgerKind::kOpen], 5);
  EXPECT_EQ(kinds[LedgerKind::kClose], 5);
  ASSERT_EQ(kinds[LedgerKind::kCorrect], 1);
  const auto& fix = contents->ledger.back();
  EXPECT_EQ(fix.kind, LedgerKind::kCorrect);
  EXPECT_EQ(fix.jobId, gang);
  EXPECT_EQ(fix.endAt, t0 + 500 * kS);
  int requeued = 0;
  for (const auto& e : contents->ledger) requeued += e.reason == "requeued";
  EXPECT_EQ(requeued, 2);
}

// Used and idle GPU time from samples, through an allotd restart and an agent restart: the job
// holds two GPUs from t0 to t0+160 s; its agent samples every 5 s, 50% busy for 100 s, then 0%.
// Ground truth: 320 GPU-s measured, 100 GPU-s used, 120 GPU-s idle; the minute from 60 s to
// 120 s alone holds 120 measured, 40 used, 40 idle.
TEST_F(LedgerScenarioTest, UsedAndIdleGpuSecondsFollowTheSamplesThroughRestarts) {
  clock_.set(telemetry::bucketOf(clock_.nowMs(), telemetry::kHourMs) + telemetry::kHourMs);
  const TimeMs t0 = clock_.nowMs();
  const int64_t id = placeTraining();
  ASSERT_EQ(job(id).state, JobState::kScheduled);
  const std::string host = firstRank(job(id)).host;
  report(host, id, ActualState::kRunning);
  // The agent's clock is 3 minutes off; only the intervals between its samples count.
  TimeMs agentClock = t0 + 180 * kS;
  auto sample = [&](double pct) {
    clock_.advance(5 * kS);
    agentClock += 5 * kS;
    model::Telemetry t{host, agentClock, 5 * kS, {}};
    const auto gpus = firstRank(job(id)).gpuIndices;  // job() returns a copy
    for (int g : gpus) {
      model::GpuSample s;
      s.index = g;
      s.utilizationPct = pct;
      t.gpus.push_back(s);
    }
    ASSERT_TRUE(cluster_->agentTelemetry(host, t).ok());
  };
  for (int i = 0; i < 12; ++i) sample(50);
  start();  // allotd restarts at 60 s
  keep(cluster_->agentConnected(host, &link_, inventory(2),
                                {{id, ActualState::kRunning, 1, {}, {}, t0, 0, ""}}));
  for (int i = 0; i < 4; ++i) sample(50);
  // The agent restarts at 80 s: it reconnects with its job and samples on from a new clock.
  cluster_->agentDisconnected(host, &link_);
  keep(cluster_->agentConnected(host, &link_, inventory(2),
                                {{id, ActualState::kRunning, 1, {}, {}, t0, 0, ""}}));
  agentClock = 1'000 * kS;
  for (int i = 0; i < 4; ++i) sample(50);
  for (int i = 0; i < 12; ++i) sample(0);
  report(host, id, ActualState::kExited, 0);
  ASSERT_EQ(job(id).state, JobState::kSucceeded);
  clock_.advance(10 * kS);
  constexpr int64_t kGpuS = kS * 1000;  // one GPU-second in milli-GPU-ms

  auto check = [&](TimeMs from, TimeMs to, int64_t measured, int64_t used, int64_t idle) {
    auto rows = cluster_->accounting().usage(admin_, {UsageBy::kUser, from, to, 0, ""});
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ((*rows)[0].usage.measured, measured * kGpuS);
    EXPECT_EQ((*rows)[0].usage.used, used * kGpuS);
    EXPECT_EQ((*rows)[0].usage.idle, idle * kGpuS);
  };
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "before the restart" : "after the restart");
    check(t0, clock_.nowMs(), 320, 100, 120);
    check(t0 + 60 * kS, t0 + 120 * kS, 120, 40, 40);
    start();
  }
}

// A fraction of a shared GPU is accounted as that fraction, and its ledger entry says so.
TEST_F(LedgerScenarioTest, AFractionOfASharedGpuCountsAsItsFraction) {
  GpuSettings shared;
  shared.shared = true;
  keep(cluster_->hosts().setGpu(admin_, "gpu-a", 0, shared));
  const TimeMs t0 = clock_.nowMs();
  JobRequest r;
  r.command = {"python", "infer.py"};
  r.resources.gpus = 1;
  r.resources.gpuMilli = 250;
  const int64_t id = keep(cluster_->submitJob(bob_, r)).value.id;
  place();
  ASSERT_EQ(job(id).state, JobState::kScheduled);
  report("gpu-a", id, ActualState::kRunning);
  clock_.advance(40 * kS);
  report("gpu-a", id, ActualState::kExited, 0);
  clock_.advance(kS);
  auto rows = usageReport(cluster_->world().ledger,
                          {UsageBy::kUser, t0, clock_.nowMs(), clock_.nowMs(), ""});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].name, "bob");
  EXPECT_EQ(rows[0].milliGpuMs, 250 * 40 * kS);
  EXPECT_EQ(rows[0].peakMilli, 250);
  auto contents = store_->loadAll();
  ASSERT_TRUE(contents.ok());
  ASSERT_EQ(contents->ledger.size(), 2u);
  EXPECT_EQ(contents->ledger[0].gpuMilli, 250);
  EXPECT_EQ(contents->ledger[0].gpuIndices, std::vector<int>{0});
  EXPECT_EQ(contents->ledger[0].host, "gpu-a");
  EXPECT_EQ(contents->ledger[0].gpuModel, "A100");
  EXPECT_EQ(contents->ledger[1].reason, "succeeded");
}

// A database from before the ledger: a job running then gets its open entry at the next start,
// from when it was placed, and is accounted from then on.
TEST_F(LedgerScenarioTest, JobsPlacedBeforeTheLedgerExistedAreAdoptedAtStart) {
  const TimeMs t0 = clock_.nowMs();
  const int64_t id = placeTraining();
  report(firstRank(job(id)).host, id, ActualState::kRunning);
  clock_.advance(10 * kS);
  auto contents = store_->loadAll();
  ASSERT_TRUE(contents.ok());
  ASSERT_EQ(contents->ledger.size(), 1u);
  contents->ledger.clear();  // as an older allotd left it
  cluster_ = std::make_unique<Cluster>(clock_, *logs_, ClusterOptions{});
  cluster_->load(*contents);
  auto adopted = cluster_->accounting().adoptUnledgeredJobs();
  EXPECT_EQ(adopted.value, 1);
  ASSERT_EQ(adopted.batch.ops.size(), 1u);
  const auto& e = std::get<store::AppendLedger>(adopted.batch.ops[0]).entry;
  EXPECT_EQ(e.jobId, id);
  EXPECT_EQ(e.startAt, t0);
  EXPECT_EQ(cluster_->accounting().adoptUnledgeredJobs().value, 0);  // once only
  auto rows = usageReport(cluster_->world().ledger,
                          {UsageBy::kTeam, t0, clock_.nowMs(), clock_.nowMs(), ""});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].milliGpuMs, 2000 * 10 * kS);
}

// ---- The report on a hand-built ledger ---------------------------------------------------------

using testsupport::closed;
using testsupport::opened;

TEST(UsageReportTest, GroupsClipsToTheWindowAndFindsThePeak) {
  LedgerIndex index;
  index.apply(opened(1, "vision", "alice", "h1", "A100", 2, 1000, 0));
  index.apply(opened(2, "vision", "carol", "h2", "H100", 1, 500, 10));
  index.apply(opened(3, "nlp", "bob", "h1", "A100", 1, 1000, 20));
  index.apply(closed(4, 1, 100));
  index.apply(closed(5, 2, 40));
  index.apply(closed(6, 2, 30, LedgerKind::kCorrect));                    // the later word wins
  index.apply(opened(7, "vision", "alice", "h1", "A100", 1, 1000, 100));  // open until now

  auto rows = usageReport(index, {UsageBy::kTeam, 0, 1000, 150, ""});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "nlp");
  EXPECT_EQ(rows[0].milliGpuMs, 1000 * 130);  // open: counts up to now
  EXPECT_EQ(rows[1].name, "vision");
  EXPECT_EQ(rows[1].milliGpuMs, 2000 * 100 + 500 * 20 + 1000 * 50);
  EXPECT_EQ(rows[1].peakMilli, 2500);  // 2 GPUs and half of one, from 10 to 30
  EXPECT_EQ(rows[1].milliGpuMsByModel.at("H100"), 500 * 20);

  // [50, 120): clipped at both ends; the hand-over at 100 is not an overlap.
  rows = usageReport(index, {UsageBy::kUser, 50, 120, 150, ""});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "alice");
  EXPECT_EQ(rows[0].milliGpuMs, 2000 * 50 + 1000 * 20);
  EXPECT_EQ(rows[0].peakMilli, 2000);
  EXPECT_EQ(rows[1].name, "bob");
  EXPECT_EQ(rows[1].milliGpuMs, 1000 * 70);

  rows = usageReport(index, {UsageBy::kHost, 0, 1000, 150, "vision"});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "h1");
  EXPECT_EQ(rows[0].milliGpuMs, 2000 * 100 + 1000 * 50);  // bob's share on h1 is left out
  EXPECT_EQ(rows[1].name, "h2");

  rows = usageReport(index, {UsageBy::kProject, 0, 1000, 150, ""});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "nlp/p");
  EXPECT_TRUE(usageReport(index, {UsageBy::kTeam, 0, 1000, 150, "nobody"}).empty());
  EXPECT_TRUE(usageReport(index, {UsageBy::kTeam, 500, 1000, 150, ""}).empty());
}

// Samples that covered moments past an allocation's recorded end (its close came after them)
// are trimmed to what was allocated, used and idle in proportion.
TEST(UsageReportTest, MeasuredTimeNeverExceedsAllocatedTime) {
  LedgerIndex index;
  model::LedgerEntry open;
  open.seq = 1;
  open.jobId = 1;
  open.team = "ml";
  open.user = "alice";
  open.host = "gpu-a";
  open.gpuModel = "A100";
  open.gpuIndices = {0};
  open.startAt = 0;
  index.apply(open);
  model::LedgerEntry close;
  close.seq = 2;
  close.kind = LedgerKind::kClose;
  close.ref = 1;
  close.jobId = 1;
  close.endAt = 10 * kS;
  index.apply(close);
  // 12 s measured for a 10 s allocation: half used, a quarter idle.
  index.addUsage(1, {12 * kS * 1000, 6 * kS * 1000, 3 * kS * 1000});
  auto rows = usageReport(index, {UsageBy::kTeam, 0, 60 * kS, 60 * kS, ""});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].milliGpuMs, 10 * kS * 1000);
  EXPECT_EQ(rows[0].usage.measured, 10 * kS * 1000);
  EXPECT_EQ(rows[0].usage.used, 5 * kS * 1000);
  EXPECT_EQ(rows[0].usage.idle, 2500 * 1000);
}

TEST(UsageReportTest, AClockThatSteppedBackStillGivesTheExactPeak) {
  LedgerIndex index;
  index.apply(opened(1, "t", "u", "h", "A100", 1, 1000, 100));
  index.apply(opened(2, "t", "u", "h", "A100", 1, 1000, 50));  // appended later, started earlier
  index.apply(closed(3, 1, 200));
  index.apply(closed(4, 2, 120));
  EXPECT_FALSE(index.startsSorted());
  auto rows = usageReport(index, {UsageBy::kTeam, 0, 1000, 1000, ""});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].milliGpuMs, 1000 * 100 + 1000 * 70);
  EXPECT_EQ(rows[0].peakMilli, 2000);
}

}  // namespace
}  // namespace allot::control
