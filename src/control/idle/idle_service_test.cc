// The idle service against its own interfaces, without a Cluster: a World the test fills (a job
// running on gpu-01 and the GPU's live reading), a FakeClock, and a JobPreemption that records
// what it was asked to reclaim. What it owns: the teams' and projects' idle policies and who may
// set them, and detection that flags an idle job and reclaims it through the preemption path.
// The whole path through the control plane is in cluster_idle_test.cc.

#include "control/idle/idle_service.h"

#include <gtest/gtest.h>

#include "control/testsupport/principals.h"
#include "control/testsupport/service_stubs.h"

namespace allot::control {
namespace {

using model::EventKind;
using model::IdleAction;

// Sessions are not under test here: the jobs side refuses what a session would ask of it.
class RefusingSessionJobs : public SessionJobs {
 public:
  Result<Change<model::Job>> submitJob(const Principal&, JobRequest) override {
    return Status::FailedPrecondition("no sessions here");
  }
  Result<Change<model::Job>> cancelJob(const Principal&, int64_t) override {
    return Status::FailedPrecondition("no sessions here");
  }
  std::string waitReason(const model::Job&) const override { return ""; }
  void jobUpdated(model::Job&, const model::Job&, store::WriteBatch&) override {}
};

class IdleServiceTest : public ::testing::Test {
 protected:
  IdleServiceTest() {
    for (const char* team : {"vision", "nlp"}) world_.teams[team].name = team;
  }

  // Alice's job `id`, running on GPU 0 of gpu-01.
  void running(int64_t id) {
    model::Job j;
    j.id = id;
    j.team = "vision";
    j.user = "alice";
    j.resources.gpus = 1;
    j.ranks = {{.host = "gpu-01", .gpuIndices = {0}}};
    j.state = model::JobState::kRunning;
    j.startedAt = clock_.nowMs();
    world_.jobs[id] = j;
    world_.onJobChanged(nullptr, world_.jobs.at(id));
  }
  // A second passes with GPU 0 of gpu-01 at `util` percent; the idle check's events.
  std::vector<model::Event> secondAt(double util) {
    clock_.advance(1000);
    GpuTelemetry& t = world_.telemetry["gpu-01"][0];
    t.sample.utilizationPct = util;
    t.receivedAt = t.sampledAt = clock_.nowMs();
    t.intervalMs = 1000;
    idle_.samplesArrived("gpu-01");
    return idle_.check().value.events;
  }
  static IdlePolicyUpdate reclaimAfter(int64_t afterMs) {
    IdlePolicyUpdate u;
    u.thresholdPct = 10;
    u.afterMs = afterMs;
    u.action = IdleAction::kReclaim;
    u.graceMs = 0;
    return u;
  }

  FakeClock clock_;
  World world_;
  EventLog events_{clock_, world_.teams};
  ProfileService profiles_{clock_, world_.teams};
  RefusingSessionJobs jobs_;
  SessionService sessions_{clock_, world_, profiles_, jobs_, ""};
  testsupport::RecordingPreemption preemption_;
  IdleService idle_{{clock_, world_, events_, sessions_, jobs_, preemption_}, {}};
  Principal admin_ = testsupport::platformAdmin();
  Principal carol_ = testsupport::userIn("carol", "vision", model::Role::kTeamAdmin);
  Principal alice_ = testsupport::userIn("alice", "vision", model::Role::kMember);
  Principal bob_ = testsupport::userIn("bob", "nlp", model::Role::kMember);
};

TEST_F(IdleServiceTest, TeamAdminsSetTheirTeamsPolicyAndMembersReadIt) {
  EXPECT_EQ(idle_.policy(alice_, "vision", "")->source, PolicySource::kPlatform);
  EXPECT_EQ(idle_.setPolicy(alice_, "vision", "", reclaimAfter(60'000)).status().code(),
            Code::kPermissionDenied);
  auto set = idle_.setPolicy(carol_, "vision", "", reclaimAfter(60'000));
  ASSERT_TRUE(set.ok()) << set.status().toString();
  EXPECT_EQ(set->value.source, PolicySource::kTeam);
  EXPECT_EQ(world_.teams.at("vision").idlePolicy->afterMs, 60'000);
  auto seen = idle_.policy(alice_, "vision", "");
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen->policy.action, IdleAction::kReclaim);
  EXPECT_EQ(idle_.policy(bob_, "nlp", "")->source, PolicySource::kPlatform)
      << "another team keeps the platform's default";
}

TEST_F(IdleServiceTest, ABadPolicyIsRefusedNamingItsFieldAndChangesNothing) {
  IdlePolicyUpdate over = reclaimAfter(60'000);
  over.thresholdPct = 150;
  EXPECT_EQ(idle_.setPolicy(carol_, "vision", "", over).status().field(), "threshold_percent");
  IdlePolicyUpdate hook;
  hook.webhook = "http://hooks.example.com/idle";
  EXPECT_EQ(idle_.setPolicy(carol_, "vision", "", hook).status().field(), "webhook")
      << "no webhook target is allowed unless platform admins allow it";
  EXPECT_FALSE(world_.teams.at("vision").idlePolicy.has_value());
}

// The platform's webhook (which may carry a secret in its URL) is not copied into the policy a
// team-admin saves over the platform's default, where the team-admin would read it back.
TEST_F(IdleServiceTest, ATeamsFirstPolicyDoesNotTakeThePlatformsWebhook) {
  model::IdlePolicy platform;
  platform.webhook = "http://hooks.internal/T0KEN-of-the-platform/";
  IdleService idle{{clock_, world_, events_, sessions_, jobs_, preemption_}, {platform, {}}};
  auto set = idle.setPolicy(carol_, "vision", "", reclaimAfter(60'000));
  ASSERT_TRUE(set.ok()) << set.status().toString();
  EXPECT_EQ(world_.teams.at("vision").idlePolicy->webhook, "");
  EXPECT_EQ(idle.policy(bob_, "nlp", "")->policy.webhook, platform.webhook)
      << "a team without a policy of its own still has the platform's";
}

TEST_F(IdleServiceTest, AnIdleJobIsFlaggedThenReclaimedThroughThePreemptionPath) {
  ASSERT_TRUE(idle_.setPolicy(admin_, "vision", "", reclaimAfter(5'000)).ok());
  running(7);
  std::vector<EventKind> kinds;
  for (int s = 0; s < 8 && preemption_.evicted.empty(); ++s) {
    for (const auto& e : secondAt(0)) kinds.push_back(e.kind);
  }
  EXPECT_EQ(preemption_.evicted, std::vector<int64_t>{7});
  ASSERT_FALSE(kinds.empty());
  EXPECT_EQ(kinds.front(), EventKind::kAllocationIdle);
  EXPECT_EQ(kinds.back(), EventKind::kAllocationReclaimed);
}

TEST_F(IdleServiceTest, ABusyJobIsLeftAlone) {
  ASSERT_TRUE(idle_.setPolicy(admin_, "vision", "", reclaimAfter(5'000)).ok());
  running(7);
  for (int s = 0; s < 8; ++s) EXPECT_TRUE(secondAt(90).empty());
  EXPECT_TRUE(preemption_.evicted.empty());
  EXPECT_FALSE(idle_.flag(7).has_value());
}

TEST_F(IdleServiceTest, AnotherTeamsPolicyAndFlagsAreNotFoundToAMember) {
  EXPECT_EQ(idle_.policy(bob_, "vision", "").status().code(), Code::kNotFound);
  EXPECT_EQ(idle_.setPolicy(bob_, "vision", "", reclaimAfter(5'000)).status().code(),
            Code::kNotFound);
  EXPECT_EQ(idle_.clearProjectPolicy(bob_, "vision", "resnet").status().code(), Code::kNotFound);
  EXPECT_EQ(idle_.flagged(bob_, "vision").status().code(), Code::kNotFound);
  EXPECT_FALSE(world_.teams.at("vision").idlePolicy.has_value());
}

}  // namespace
}  // namespace allot::control
