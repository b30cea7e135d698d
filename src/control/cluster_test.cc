#include "control/cluster.h"

#include <gtest/gtest.h>

#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

TEST_F(ClusterTest, TokensAuthenticateOnlyWhenExact) {
  EXPECT_EQ(alice_.name, "alice");
  EXPECT_EQ(alice_.soleTeam(), "vision");
  EXPECT_FALSE(cluster_->access().authenticate("tok-1_wrong").has_value());
  EXPECT_FALSE(cluster_->access().authenticate("garbage").has_value());
  EXPECT_FALSE(cluster_->access().bootstrapAdmin().has_value());  // only on first start
}

TEST_F(ClusterTest, StoresOnlyTokenHashes) {
  auto u = cluster_->access().createUser(admin_, "carol", "vision", model::Role::kMember);
  ASSERT_TRUE(u.ok());
  for (const auto& op : u->batch.ops) {
    if (auto* t = std::get_if<store::PutToken>(&op)) {
      EXPECT_NE(t->token.hash, u->value.token);
      EXPECT_EQ(t->token.hash.find(u->value.token), std::string::npos);
    }
  }
}

TEST_F(ClusterTest, MembersCannotAdminister) {
  auto t = cluster_->access().createTeam(alice_, "rogue");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kPermissionDenied);
  EXPECT_FALSE(cluster_->access().createUser(alice_, "x", "vision", model::Role::kMember).ok());
  EXPECT_FALSE(cluster_->hosts().createJoinToken(alice_, 1000).ok());
}

TEST_F(ClusterTest, BadInputChangesNothing) {
  auto before = cluster_->world().jobs.size();
  JobRequest r;
  r.command = {};
  EXPECT_EQ(cluster_->submitJob(alice_, r).status().field(), "command");
  r.command = {"x"};
  r.resources.gpus = -1;
  EXPECT_EQ(cluster_->submitJob(alice_, r).status().field(), "gpus");
  r.resources.gpus = 0;
  r.project = "nope";
  EXPECT_EQ(cluster_->submitJob(alice_, r).status().code(), Code::kNotFound);
  r.project = "";
  r.env = {{"CUDA_VISIBLE_DEVICES", "0"}};
  EXPECT_EQ(cluster_->submitJob(alice_, r).status().field(), "env");
  EXPECT_EQ(cluster_->world().jobs.size(), before);
  EXPECT_FALSE(cluster_->access().createTeam(admin_, "Bad Name!").ok());
}

TEST_F(ClusterTest, AnotherTeamsJobsDoNotExist) {
  int64_t id = submit(alice_, 0);
  EXPECT_TRUE(cluster_->getJob(alice_, id).ok());
  EXPECT_EQ(cluster_->getJob(bob_, id).status().code(), Code::kNotFound);
  EXPECT_EQ(cluster_->cancelJob(bob_, id).status().code(), Code::kNotFound);
  EXPECT_TRUE(cluster_->listJobs(bob_, {}).empty());
  EXPECT_EQ(cluster_->listJobs(admin_, {}).size(), 1u);
  JobRequest r;
  r.command = {"x"};
  r.team = "vision";
  EXPECT_EQ(cluster_->submitJob(bob_, r).status().code(), Code::kNotFound);
}

TEST_F(ClusterTest, ListsJobsInAnyOfSeveralStatesAndOfOneUser) {
  int64_t queued = submit(alice_, 0);
  int64_t cancelled = submit(alice_, 0);
  ASSERT_TRUE(cluster_->cancelJob(alice_, cancelled).ok());
  JobFilter f;
  f.states = {model::JobState::kQueued, model::JobState::kRunning};
  auto live = cluster_->listJobs(admin_, f);
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].id, queued);
  f.states = {model::JobState::kQueued, model::JobState::kCancelled};
  EXPECT_EQ(cluster_->listJobs(admin_, f).size(), 2u);
  f.user = "nobody";
  EXPECT_TRUE(cluster_->listJobs(admin_, f).empty());
  f.user = "alice";
  EXPECT_EQ(cluster_->listJobs(admin_, f).size(), 2u);
}

TEST_F(ClusterTest, ListsJobsSubmittedInATimeWindow) {
  int64_t early = submit(alice_, 0);
  clock_.advance(60'000);
  int64_t late = submit(alice_, 0);
  JobFilter f;
  f.submittedSince = clock_.nowMs() - 30'000;
  auto recent = cluster_->listJobs(alice_, f);
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_EQ(recent[0].id, late);
  f = {};
  f.submittedUntil = clock_.nowMs() - 30'000;
  auto old = cluster_->listJobs(alice_, f);
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].id, early);
}

TEST_F(ClusterTest, PlacesAndPushesOnlyDurablePlacements) {
  joinHost("gpu-01", 4);
  int64_t a = submit(alice_, 2);
  int64_t b = submit(alice_, 2);
  int64_t c = submit(alice_, 1);
  auto pass = cluster_->schedulePass();
  EXPECT_EQ(pass.value.placed.size(), 2u);
  EXPECT_EQ(cluster_->getJob(alice_, a)->state, JobState::kScheduled);
  EXPECT_EQ(firstRank(*cluster_->getJob(alice_, b)).gpuIndices, (std::vector<int>{2, 3}));
  auto waiting = cluster_->getJob(alice_, c);
  EXPECT_EQ(waiting->state, JobState::kQueued);
  EXPECT_NE(waiting->reason.find("free"), std::string::npos);
  EXPECT_EQ(cluster_->waitOf(c)->position, 1);
  // Not durable yet: the agent must not hear of them.
  EXPECT_EQ(cluster_->desiredMessage("gpu-01").find("\"id\":" + std::to_string(a)),
            std::string::npos);
  cluster_->passDurable(pass.value);
  EXPECT_NE(cluster_->desiredMessage("gpu-01").find("\"id\":" + std::to_string(a)),
            std::string::npos);
}

TEST_F(ClusterTest, AJobInAnImageIsAllowedByItsTeamPullsThenRunsAndKeepsItsDigest) {
  joinHost("plain", 2);  // its agent runs no images
  JobRequest r = request({"python3", "train.py"}, 1);
  r.image = "registry:5000/ml/pytorch:2.3";
  // A team may use no image until a platform admin allows it; a member may not allow it.
  auto refused = cluster_->submitJob(alice_, r);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().field(), "image");
  // What the team may not use is said as that, before what the fleet lacks.
  EXPECT_NE(refused.status().message().find("not an image team 'vision' may use"),
            std::string::npos)
      << refused.status().message();
  EXPECT_EQ(cluster_->access().setImageAllow(alice_, "vision", {"registry:5000/"}).status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(cluster_->access().setImageAllow(bob_, "vision", {"registry:5000/"}).status().code(),
            Code::kNotFound);  // another team's: not even there
  ASSERT_TRUE(cluster_->access().setImageAllow(admin_, "vision", {"registry:5000/ml/"}).ok());
  r.image = "registry:5000/other/x:1";
  EXPECT_FALSE(cluster_->submitJob(alice_, r).ok());
  r.image = "registry:5000/ml/pytorch:2.3";
  // No host runs images: refused at submission, or queued anyway with that reason.
  auto noHost = cluster_->submitJob(alice_, r);
  ASSERT_FALSE(noHost.ok());
  EXPECT_EQ(noHost.status().field(), "image");
  r.queueAnyway = true;
  const int64_t a = submitRequest(alice_, r);
  cluster_->passDurable(cluster_->schedulePass().value);
  EXPECT_EQ(job(a).state, JobState::kQueued);
  EXPECT_NE(job(a).reason.find("runs jobs in images"), std::string::npos) << job(a).reason;
  // A host whose agent runs images takes it.
  joinOnly("gpu-01", 2);
  model::Inventory images = inventory(2);
  images.images = true;
  cluster_->agentConnected("gpu-01", &link_, images, {});
  cluster_->passDurable(cluster_->schedulePass().value);
  ASSERT_EQ(job(a).state, JobState::kScheduled) << job(a).reason;
  EXPECT_EQ(firstRank(job(a)).host, "gpu-01");
  EXPECT_NE(cluster_->desiredMessage("gpu-01").find("\"image\":\"registry:5000/ml/pytorch:2.3\""),
            std::string::npos);

  ActualJob pulling{a, ActualState::kPulling, 0, {}, {}, 0, 0, "waiting for another pull"};
  pulling.pullBytes = 10;
  pulling.pullTotal = 40;
  cluster_->agentStatus("gpu-01", {pulling});
  model::Job j = job(a);
  EXPECT_EQ(j.state, JobState::kPulling);
  EXPECT_EQ(j.reason, "pulling image registry:5000/ml/pytorch:2.3: waiting for another pull");
  ASSERT_TRUE(cluster_->pullOf(a));
  EXPECT_EQ(cluster_->pullOf(a)->bytes, 10);
  EXPECT_EQ(cluster_->pullOf(a)->total, 40);
  EXPECT_FALSE(cluster_->hosts().allocations(admin_, "gpu-01").empty());  // its GPU is held
  // Still carried: the agent starts it once the image is there.
  EXPECT_NE(cluster_->desiredMessage("gpu-01").find("train.py"), std::string::npos);

  ActualJob run = running(a);
  run.imageDigest = "sha256:" + std::string(64, 'e');
  cluster_->agentStatus("gpu-01", {run});
  j = job(a);
  EXPECT_EQ(j.state, JobState::kRunning);
  EXPECT_EQ(j.imageDigest, run.imageDigest);
  EXPECT_TRUE(j.reason.empty());
  EXPECT_FALSE(cluster_->pullOf(a));

  // Cancelled while pulling: the pull's reports do not hide who cancelled it, and it ends
  // cancelled when the agent drops the pull.
  const int64_t b = submitRequest(alice_, r);
  cluster_->passDurable(cluster_->schedulePass().value);
  pulling.id = b;
  cluster_->agentStatus("gpu-01", {pulling});
  ASSERT_EQ(job(b).state, JobState::kPulling);
  ASSERT_TRUE(cluster_->cancelJob(alice_, b).ok());
  cluster_->agentStatus("gpu-01", {pulling});
  EXPECT_NE(job(b).reason.find("alice"), std::string::npos) << job(b).reason;
  ActualJob dropped{
      b, ActualState::kExited, 0, {}, {}, 0, clock_.nowMs(), "cancelled before it started"};
  cluster_->agentStatus("gpu-01", {dropped});
  EXPECT_EQ(job(b).state, JobState::kCancelled);
  EXPECT_NE(job(b).reason.find("alice"), std::string::npos) << job(b).reason;
  EXPECT_FALSE(cluster_->pullOf(b));
}

TEST_F(ClusterTest, AgentReportsDriveJobStates) {
  joinHost("gpu-01", 2);
  int64_t a = submit(alice_, 1);
  auto pass = cluster_->schedulePass();
  cluster_->passDurable(pass.value);
  model::ActualJob run{a, model::ActualState::kRunning, 123, {}, {}, clock_.nowMs(), 0, ""};
  cluster_->agentStatus("gpu-01", {run});
  EXPECT_EQ(cluster_->getJob(alice_, a)->state, JobState::kRunning);
  reportEnded("gpu-01", run, 3);
  auto j = cluster_->getJob(alice_, a);
  EXPECT_EQ(j->state, JobState::kFailed);
  EXPECT_EQ(j->exitCode, 3);
  EXPECT_TRUE(cluster_->hosts().allocations(admin_, "gpu-01").empty());  // GPUs free again
}

// Found by a review: the times a host reported were taken as they came. A clock an hour ahead
// put off --max-runtime by an hour (now - startedAt < 0), one behind (or a hostile agent) added
// GPU-hours to the team's account, and INT64_MIN overflowed the subtraction. They are now taken
// between the job's placement and allotd's now.
TEST_F(ClusterTest, TimesAHostReportsAreTakenBetweenThePlacementAndNow) {
  joinHost("gpu-01", 2);
  const int64_t ahead = submitSleep(alice_, 1, false, 10 * kMin);
  const int64_t behind = submit(alice_, 1);
  place();
  const TimeMs placedAt = clock_.nowMs();
  clock_.advance(kS);
  model::ActualJob early{ahead, ActualState::kRunning, 1, {}, {}, clock_.nowMs() + kHour, 0, ""};
  model::ActualJob late{behind, ActualState::kRunning, 2, {}, {}, INT64_MIN, 0, ""};
  cluster_->agentStatus("gpu-01", {early, late});
  EXPECT_EQ(job(ahead).startedAt, clock_.nowMs()) << "not in the future";
  EXPECT_EQ(job(behind).startedAt, placedAt) << "not before its placement";
  clock_.advance(11 * kMin);
  EXPECT_EQ(cluster_->enforceMaxRuntime().value, 1) << "the max runtime is kept on allotd's clock";
  EXPECT_TRUE(job(ahead).cancelRequested);
  late.state = ActualState::kExited;
  late.exitCode = 0;
  late.finishedAt = INT64_MAX;
  cluster_->agentStatus("gpu-01", {late});
  EXPECT_EQ(job(behind).finishedAt, clock_.nowMs());
  EXPECT_EQ(job(behind).state, JobState::kSucceeded);
}

TEST_F(ClusterTest, CancelOfRunningJobWaitsForTheAgent) {
  joinHost("gpu-01", 1);
  int64_t a = submit(alice_, 1);
  cluster_->passDurable(cluster_->schedulePass().value);
  auto c = cluster_->cancelJob(alice_, a);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->value.state, JobState::kScheduled);
  EXPECT_TRUE(c->pushHosts.count("gpu-01"));
  EXPECT_NE(cluster_->desiredMessage("gpu-01").find("\"cancel\":true"), std::string::npos);
  model::ActualJob killed{a, model::ActualState::kExited, 1, {}, 15, 1, 2, ""};
  cluster_->agentStatus("gpu-01", {killed});
  EXPECT_EQ(cluster_->getJob(alice_, a)->state, JobState::kCancelled);
  EXPECT_EQ(cluster_->cancelJob(alice_, a).status().code(), Code::kFailedPrecondition);
}

TEST_F(ClusterTest, UnreachableHostLosesItsJobsAfterTimeout) {
  const int64_t a = runningJob().id;
  cluster_->agentDisconnected("gpu-01", &link_);
  EXPECT_EQ(cluster_->world().hosts.at("gpu-01").state, model::HostState::kUnreachable);
  clock_.advance(30'000);
  cluster_->checkLiveness();
  EXPECT_EQ(cluster_->getJob(alice_, a)->state, JobState::kRunning);
  clock_.advance(31'000);
  auto c = cluster_->checkLiveness();
  EXPECT_EQ(c.value, 1);
  EXPECT_EQ(cluster_->getJob(alice_, a)->state, JobState::kLost);
}

TEST_F(ClusterTest, ReconnectingAgentThatForgotAJobMakesItLost) {
  const int64_t a = runningJob().id;
  cluster_->agentDisconnected("gpu-01", &link_);
  cluster_->agentConnected("gpu-01", &link_, inventory(1), {});
  EXPECT_EQ(cluster_->getJob(alice_, a)->state, JobState::kLost);
}

TEST_F(ClusterTest, ReconnectingAgentReadoptsRunningJob) {
  joinHost("gpu-01", 1);
  int64_t a = submit(alice_, 1);
  cluster_->passDurable(cluster_->schedulePass().value);
  model::ActualJob run{a, model::ActualState::kRunning, 1, {}, {}, 1, 0, ""};
  cluster_->agentStatus("gpu-01", {run});
  cluster_->agentDisconnected("gpu-01", &link_);
  cluster_->agentConnected("gpu-01", &link_, inventory(1), {run});
  EXPECT_EQ(cluster_->getJob(alice_, a)->state, JobState::kRunning);
  EXPECT_EQ(cluster_->world().hosts.at("gpu-01").state, model::HostState::kOnline);
}

TEST_F(ClusterTest, ExpiredJoinTokenIsRefused) {
  auto jt = cluster_->hosts().createJoinToken(admin_, 1000);
  clock_.advance(2000);
  auto joined = cluster_->hosts().joinHost(jt->value.secret, "late", inventory(1));
  ASSERT_FALSE(joined.ok());
  EXPECT_EQ(joined.status().code(), Code::kUnauthenticated);
}

TEST_F(ClusterTest, HostCredentialAuthenticatesAsHost) {
  auto cred = joinHost("gpu-02", 1);
  auto p = cluster_->access().authenticate(cred);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->kind, Principal::Kind::kHost);
  EXPECT_EQ(p->name, "gpu-02");
}

// A pass that refuses its snapshot places nothing for anyone: that is said where users and admins
// look (every queued job's wait, one admin event per distinct error, a metric), and it clears
// once a pass succeeds.
class RefusedSnapshotTest : public ClusterTest {
 protected:
  void adjustOptions(ClusterOptions& o) override {
    o.decide = [this](const sched::Snapshot& s) -> Result<sched::Decisions> {
      if (refuse_) return Status::InvalidArgument("node gpu-01: resources out of range");
      return sched::decide(s);
    };
  }
  bool refuse_ = true;
};

TEST_F(RefusedSnapshotTest, EveryQueuedJobWaitsAndAdminsHearOnce) {
  joinHost("gpu-01", 2);
  const int64_t a = submitSleep(alice_, 1), b = submitSleep(bob_, 1);
  auto pass = cluster_->schedulePass();
  EXPECT_TRUE(pass.value.placed.empty());
  EXPECT_FALSE(pass.batch.empty());  // the event is written
  for (int64_t id : {a, b}) {
    auto wait = cluster_->waitOf(id);
    ASSERT_TRUE(wait.has_value()) << id;
    EXPECT_EQ(wait->kind, sched::WaitKind::kSchedulerError);
    // Members are told that nothing places, not the error, which may name any team's host.
    const std::string reason = cluster_->waitReason(*cluster_->getJob(admin_, id));
    EXPECT_NE(reason.find("the scheduler refused"), std::string::npos) << reason;
    EXPECT_EQ(reason.find("gpu-01"), std::string::npos) << reason;
  }
  EventFilter f;
  f.kind = model::EventKind::kSchedulerError;
  auto seen = cluster_->eventLog().list(admin_, f);
  ASSERT_TRUE(seen.ok());
  ASSERT_EQ(seen->size(), 1u);
  EXPECT_NE(seen->front().message.find("gpu-01: resources out of range"), std::string::npos);
  EXPECT_TRUE(cluster_->eventLog().list(alice_, f)->empty());  // cluster-wide: platform admins only

  // The same error again: counted, not announced again.
  EXPECT_TRUE(cluster_->schedulePass().batch.empty());
  EXPECT_EQ(cluster_->world().refusedPasses, 2);
  EXPECT_EQ(cluster_->eventLog().list(admin_, f)->size(), 1u);

  refuse_ = false;
  EXPECT_EQ(place().size(), 2u);
  EXPECT_TRUE(cluster_->world().schedulerError.empty());
}

}  // namespace
}  // namespace allot::control

namespace allot::control {
namespace {

TEST_F(ClusterTest, UsageHistoryGrowsWithWhatATeamHoldsAndIsWrittenAtMostOnceAMinute) {
  joinHost("gpu-01", 4);
  submit(alice_, 2);
  cluster_->passDurable(cluster_->schedulePass().value);
  clock_.advance(3'600'000);
  auto c = cluster_->accountUsage();
  // Two GPUs for an hour, decayed with a 24-hour half-life while it accrued: a little under
  // 7,200 GPU-seconds.
  const auto& vision = cluster_->world().teams.at("vision");
  EXPECT_GT(vision.usageGpuSeconds, 7'000);
  EXPECT_LT(vision.usageGpuSeconds, 7'200);
  EXPECT_EQ(cluster_->world().teams.at("nlp").usageGpuSeconds, 0);
  ASSERT_EQ(c.value, 1);
  EXPECT_NE(findOp<store::PutTeam>(c), nullptr);
  clock_.advance(1'000);
  EXPECT_EQ(cluster_->accountUsage().value, 0);  // grew in memory, not written yet
  EXPECT_GT(cluster_->world().teams.at("vision").usageGpuSeconds, vision.usageGpuSeconds - 1);
}

}  // namespace
}  // namespace allot::control
