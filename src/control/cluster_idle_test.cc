// Idle allocations: detection from telemetry on a fake clock, policies and their precedence,
// reclaiming through preemption, events that survive a restart.
#include <gtest/gtest.h>

#include "control/cluster.h"
#include "control/cluster_test_fixture.h"
#include "model/json.h"
#include "store/sqlite/sqlite_store.h"

namespace allot::control {
namespace {

using model::EventKind;

class ClusterIdleTest : public ClusterTest {
 protected:
  void adjustOptions(ClusterOptions& o) override {
    o.webhookAllow = {"http://hooks.example.com:8080/"};
  }
  // A running job of alice's on gpu-01, holding `gpus` GPUs.
  int64_t runJob(int gpus, bool preemptible = false, const std::string& project = "") {
    JobRequest r;
    r.command = {"train"};
    r.resources.gpus = gpus;
    r.preemptible = preemptible;
    r.project = project;
    auto c = cluster_->submitJob(alice_, r);
    EXPECT_TRUE(c.ok()) << c.status().toString();
    record(*c);
    auto pass = cluster_->schedulePass();
    record(pass);
    cluster_->passDurable(pass.value);
    run_ = {c->value.id, model::ActualState::kRunning, 1, {}, {}, clock_.nowMs(), 0, ""};
    record(cluster_->agentStatus("gpu-01", {run_}));
    EXPECT_EQ(cluster_->getJob(alice_, c->value.id)->state, JobState::kRunning);
    return c->value.id;
  }

  // One telemetry round: every GPU of gpu-01 at `util` percent.
  void telemetry(double util, int gpus = 4) {
    model::Telemetry t;
    t.host = "gpu-01";
    t.at = clock_.nowMs();
    t.intervalMs = 1000;
    for (int g = 0; g < gpus; ++g) {
      model::GpuSample s;
      s.index = g;
      s.utilizationPct = util;
      t.gpus.push_back(s);
    }
    ASSERT_TRUE(cluster_->agentTelemetry("gpu-01", t).ok());
  }

  // Advances the clock second by second, sending telemetry at `util` and running the idle check
  // as allotd's liveness loop does; returns the events emitted.
  std::vector<model::Event> idleFor(int64_t ms, double util) {
    std::vector<model::Event> out;
    for (int64_t t = 0; t < ms; t += 1000) {
      clock_.advance(1000);
      telemetry(util);
      auto c = cluster_->idle().check();
      record(c);
      cluster_->evictionsDurable(c.value.reclaimed);
      out.insert(out.end(), c.value.events.begin(), c.value.events.end());
    }
    return out;
  }

  void setTeamPolicy(const std::string& team, IdlePolicyUpdate u) {
    auto c = cluster_->idle().setPolicy(admin_, team, "", u);
    ASSERT_TRUE(c.ok()) << c.status().toString();
    record(*c);
  }

  template <typename T>
  void record(const Change<T>& c) {
    for (const auto& op : c.batch.ops) writes_.ops.push_back(op);
  }

  static IdlePolicyUpdate policy(double threshold, int64_t afterMs, model::IdleAction action,
                                 int64_t graceMs) {
    return {threshold, afterMs, action, graceMs, std::nullopt};
  }

  model::ActualJob run_;
  store::WriteBatch writes_;  // every write so far, in order, for restarts
};

TEST_F(ClusterIdleTest, AJobUnderTheThresholdForTheDurationIsFlaggedOnce) {
  joinHost("gpu-01", 4);
  setTeamPolicy("vision", policy(10, 60'000, model::IdleAction::kNotify, 0));
  int64_t id = runJob(2);
  auto events = idleFor(59'000, 3);
  EXPECT_TRUE(events.empty());
  EXPECT_FALSE(cluster_->idle().flag(id));
  events = idleFor(2'000, 3);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, EventKind::kAllocationIdle);
  EXPECT_EQ(events[0].jobId, id);
  EXPECT_EQ(events[0].team, "vision");
  EXPECT_EQ(events[0].user, "alice");
  EXPECT_EQ(events[0].hosts, std::vector<std::string>{"gpu-01"});
  auto flag = cluster_->idle().flag(id);
  ASSERT_TRUE(flag);
  EXPECT_EQ(flag->reclaimAt, 0);  // notify only
  EXPECT_EQ(flag->gpus, 2);
  // Still idle: no second event for the same episode, and the job keeps running.
  EXPECT_TRUE(idleFor(120'000, 3).empty());
  EXPECT_EQ(cluster_->getJob(alice_, id)->state, JobState::kRunning);
  auto listed = cluster_->idle().flagged(alice_, "");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].jobId, id);
  // Another team sees neither the flag nor the event.
  EXPECT_TRUE(cluster_->idle().flagged(bob_, "")->empty());
  EXPECT_TRUE(cluster_->eventLog().list(bob_, {})->empty());
  EXPECT_EQ(cluster_->eventLog().list(bob_, EventFilter{.team = "vision"}).status().code(),
            Code::kNotFound);
}

TEST_F(ClusterIdleTest, BusyTimeResetsTheClockAndBusyAfterAFlagClearsIt) {
  joinHost("gpu-01", 4);
  setTeamPolicy("vision", policy(10, 30'000, model::IdleAction::kNotify, 0));
  int64_t id = runJob(1);
  EXPECT_TRUE(idleFor(20'000, 0).empty());
  EXPECT_TRUE(idleFor(1'000, 10).empty());  // at the threshold is busy
  EXPECT_TRUE(idleFor(20'000, 0).empty());  // 20 s since busy: not yet
  auto flagged = idleFor(11'000, 0);
  ASSERT_EQ(flagged.size(), 1u);
  EXPECT_EQ(flagged[0].kind, EventKind::kAllocationIdle);
  auto again = idleFor(1'000, 90);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].kind, EventKind::kAllocationBusyAgain);
  EXPECT_FALSE(cluster_->idle().flag(id));
}

TEST_F(ClusterIdleTest, NoCurrentTelemetryCountsAsBusy) {
  joinHost("gpu-01", 4);
  setTeamPolicy("vision", policy(10, 5'000, model::IdleAction::kNotify, 0));
  int64_t id = runJob(1);
  for (int i = 0; i < 60; ++i) {  // the agent sends nothing
    clock_.advance(1000);
    EXPECT_TRUE(cluster_->idle().check().value.events.empty());
  }
  EXPECT_FALSE(cluster_->idle().flag(id));
}

TEST_F(ClusterIdleTest, AProjectPolicyOverridesItsTeamsAndDeleteInheritsAgain) {
  joinHost("gpu-01", 4);
  ASSERT_TRUE(cluster_->access().createProject(admin_, "resnet", "vision").ok());
  setTeamPolicy("vision", policy(10, 60'000, model::IdleAction::kNotify, 0));
  IdlePolicyUpdate lenient;
  lenient.afterMs = 600'000;
  auto set = cluster_->idle().setPolicy(admin_, "vision", "resnet", lenient);
  ASSERT_TRUE(set.ok()) << set.status().toString();
  EXPECT_EQ(set->value.source, PolicySource::kProject);
  EXPECT_EQ(set->value.policy.thresholdPct, 10);  // what it saw before, kept
  auto shown = cluster_->idle().policy(alice_, "vision", "resnet");
  ASSERT_TRUE(shown.ok());
  EXPECT_EQ(shown->policy.afterMs, 600'000);

  int64_t inProject = runJob(1, false, "resnet");
  int64_t inTeam = runJob(1);
  auto events = idleFor(120'000, 0);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].jobId, inTeam);
  EXPECT_FALSE(cluster_->idle().flag(inProject));

  auto cleared = cluster_->idle().clearProjectPolicy(admin_, "vision", "resnet");
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(cleared->value.source, PolicySource::kTeam);
  events = idleFor(1'000, 0);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].jobId, inProject);
}

TEST_F(ClusterIdleTest, PoliciesAreCheckedAndOnlyManagersMaySetThem) {
  IdlePolicyUpdate bad;
  bad.thresholdPct = 150;
  auto r = cluster_->idle().setPolicy(admin_, "vision", "", bad);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "threshold_percent");
  IdlePolicyUpdate hook;
  hook.webhook = "ftp://example.com/x";
  r = cluster_->idle().setPolicy(admin_, "vision", "", hook);
  EXPECT_EQ(r.status().field(), "webhook");
  hook.webhook = "http://hooks.example.com:8080/t/secret?x=1";
  EXPECT_TRUE(cluster_->idle().setPolicy(admin_, "vision", "", hook).ok());
  // A member reads, but may not set; another team does not see it.
  EXPECT_TRUE(cluster_->idle().policy(alice_, "vision", "").ok());
  IdlePolicyUpdate u;
  u.thresholdPct = 1;
  EXPECT_EQ(cluster_->idle().setPolicy(alice_, "vision", "", u).status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(cluster_->idle().policy(bob_, "vision", "").status().code(), Code::kNotFound);
  EXPECT_EQ(cluster_->idle().setPolicy(bob_, "vision", "", u).status().code(), Code::kNotFound);
  // Without a policy of its own, a team has the platform's default.
  auto platform = cluster_->idle().policy(bob_, "nlp", "");
  ASSERT_TRUE(platform.ok());
  EXPECT_EQ(platform->source, PolicySource::kPlatform);
  EXPECT_EQ(platform->policy, model::IdlePolicy{});
}

TEST_F(ClusterIdleTest, ReclaimRequeuesAPreemptibleJobAfterTheGrace) {
  joinHost("gpu-01", 4);
  setTeamPolicy("vision", policy(10, 10'000, model::IdleAction::kReclaim, 5'000));
  int64_t id = runJob(1, /*preemptible=*/true);
  auto events = idleFor(10'000, 2);
  ASSERT_EQ(events.size(), 1u);
  auto flag = cluster_->idle().flag(id);
  ASSERT_TRUE(flag);
  EXPECT_EQ(flag->reclaimAt, flag->notifiedAt + 5'000);
  EXPECT_TRUE(idleFor(4'000, 2).empty());
  events = idleFor(1'000, 2);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, EventKind::kAllocationReclaimed);
  auto j = cluster_->getJob(alice_, id);
  EXPECT_TRUE(j->evicting);
  // Once durable, the agent is told to stop it with the preemption grace.
  EXPECT_NE(cluster_->desiredMessage("gpu-01").find("\"cancel\":true"), std::string::npos);
  reportEnded("gpu-01", run_, {}, 15);
  j = cluster_->getJob(alice_, id);
  EXPECT_EQ(j->state, JobState::kQueued);
  EXPECT_NE(j->reason.find("reclaimed: GPUs under 10% for 10s"), std::string::npos) << j->reason;
  EXPECT_EQ(j->preemptions, 1);
}

TEST_F(ClusterIdleTest, ReclaimEndsAJobThatIsNotPreemptibleWithTheReason) {
  joinHost("gpu-01", 4);
  setTeamPolicy("vision", policy(10, 10'000, model::IdleAction::kReclaim, 0));
  int64_t id = runJob(1);
  auto events = idleFor(12'000, 0);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].kind, EventKind::kAllocationReclaimed);
  reportEnded("gpu-01", run_, {}, 15);
  auto j = cluster_->getJob(alice_, id);
  EXPECT_EQ(j->state, JobState::kPreempted);
  EXPECT_NE(j->reason.find("reclaimed: GPUs under 10% for 10s"), std::string::npos) << j->reason;
}

TEST_F(ClusterIdleTest, EventsAndPoliciesSurviveARestart) {
  joinHost("gpu-01", 4);
  setTeamPolicy("vision", policy(10, 5'000, model::IdleAction::kNotify, 0));
  int64_t id = runJob(1);
  ASSERT_EQ(idleFor(6'000, 0).size(), 1u);
  ASSERT_EQ(idleFor(1'000, 50).size(), 1u);

  // Every write so far, through the real store, read back into a fresh Cluster.
  auto store = store::SqliteStore::open((dir_ / "allot.db").string());
  ASSERT_TRUE(store.ok()) << store.status().toString();
  store::WriteBatch all;  // the fixture's teams were made before recording began
  for (const auto& [name, team] : cluster_->world().teams) all.add(store::PutTeam{team});
  for (const auto& op : writes_.ops) all.ops.push_back(op);
  ASSERT_TRUE((*store)->commit(all).ok());
  auto contents = (*store)->loadAll();
  ASSERT_TRUE(contents.ok());
  Cluster restarted(clock_, *logs_, ClusterOptions{});
  restarted.load(*contents);
  auto events = restarted.eventLog().list(alice_, EventFilter{.jobId = id});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].kind, EventKind::kAllocationIdle);
  EXPECT_EQ((*events)[1].kind, EventKind::kAllocationBusyAgain);
  EXPECT_EQ(model::toJson((*events)[0])["details"]["threshold_percent"], 10);
  auto kinds =
      restarted.eventLog().list(alice_, EventFilter{.kind = EventKind::kAllocationBusyAgain});
  ASSERT_EQ(kinds->size(), 1u);
  EXPECT_EQ(restarted.idle().policy(alice_, "vision", "")->policy.afterMs, 5'000);
  // New events continue the numbering.
  EXPECT_EQ(restarted.eventLog().nextId(), (*events)[1].id + 1);
}

TEST(IdlePolicy, APolicyChangedWhileFlaggedAppliesFromThen) {
  model::IdlePolicy notify;
  notify.afterMs = 10'000;
  model::IdlePolicy reclaim = notify;
  reclaim.action = model::IdleAction::kReclaim;
  reclaim.graceMs = 5'000;
  IdleTrack t;
  t.lastBusyAt = 0;
  EXPECT_EQ(stepIdle(t, notify, 10'000), IdleStep::kFlag);
  EXPECT_EQ(t.reclaimAt, 0);
  // Now reclaim: the grace counts from the change, not from the notification.
  EXPECT_EQ(stepIdle(t, reclaim, 20'000), IdleStep::kNone);
  EXPECT_EQ(t.reclaimAt, 25'000);
  // Back to notify before the grace ends: nothing is reclaimed.
  EXPECT_EQ(stepIdle(t, notify, 24'000), IdleStep::kNone);
  EXPECT_EQ(stepIdle(t, notify, 60'000), IdleStep::kNone);
  EXPECT_EQ(t.reclaimAt, 0);
  EXPECT_EQ(stepIdle(t, reclaim, 61'000), IdleStep::kNone);
  EXPECT_EQ(stepIdle(t, reclaim, 66'000), IdleStep::kReclaim);
  EXPECT_EQ(stepIdle(t, reclaim, 67'000), IdleStep::kNone);  // once
}

TEST(IdlePolicy, WebhookUrlsArePlainHttpWithAHost) {
  auto t = parseWebhookUrl("http://127.0.0.1:9000/hook?k=v");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->host, "127.0.0.1");
  EXPECT_EQ(t->port, 9000);
  EXPECT_EQ(t->target, "/hook?k=v");
  EXPECT_EQ(parseWebhookUrl("http://example.com")->target, "/");
  for (const char* bad :
       {"https://example.com/", "ftp://x/", "http://", "http://a b/", "http://u:p@example.com/",
        "http://example.com:0/", "http://example.com:99999/", "http://[::1]/"}) {
    EXPECT_FALSE(parseWebhookUrl(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace allot::control
