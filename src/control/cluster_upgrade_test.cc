// Rolling upgrades through the control plane: batches of at most max-unavailable hosts, each
// drained, given the profile's hook and a health check, and returned to service under the same
// owner; the first failure stops the upgrade and leaves the hosts not yet started alone; a step
// given up by hand stops it too; an allotd restart picks it up where it was.

#include <gtest/gtest.h>

#include "control/cluster.h"
#include "control/cluster_test_fixture.h"
#include "model/json.h"

namespace allot::control {
namespace {

using model::UpgradeHostState;
using model::UpgradeState;

constexpr const char* kProfile = "driver-550";

void withProfile(ClusterOptions& o) {
  o.hookProfiles[kProfile] = {"script", "/usr/local/sbin/upgrade-driver.sh"};
}

// What the agent reports when the task's hook ran (and, when ok, the health check passed).
model::HostTaskResult taskRan(int64_t id, bool ok) {
  model::HostTaskResult r;
  r.id = id;
  r.ok = ok;
  r.failedStep = ok ? "" : "hook";
  r.hook = model::HookResult{id, ok, ok ? 0 : 2, false, ok ? "driver 550 installed\n" : "dkms\n"};
  r.output = r.hook->output;
  return r;
}

class UpgradeTest : public ClusterTest {
 protected:
  void adjustOptions(ClusterOptions& o) override { withProfile(o); }
  void SetUp() override {
    ClusterTest::SetUp();
    for (const char* h : {"gpu-01", "gpu-02", "gpu-03"}) joinHost(h, 1);
  }
  const model::Upgrade& upgrade(int64_t id) { return cluster_->world().upgrades.at(id); }
  UpgradeHostState stepOf(int64_t id, const std::string& name) {
    for (const auto& e : upgrade(id).hosts)
      if (e.host == name) return e.state;
    ADD_FAILURE() << "no step for " << name;
    return UpgradeHostState::kPending;
  }
  int64_t start(int maxUnavailable, const std::string& pool = "shared") {
    auto c = cluster_->hosts().startUpgrade(admin_, pool, kProfile, maxUnavailable, 0);
    EXPECT_TRUE(c.ok()) << c.status().toString();
    return c.ok() ? c->value.id : 0;
  }
  // The host's agent reports its upgrade task's result.
  void finish(const std::string& name, bool ok) {
    ASSERT_TRUE(host(name).task.has_value()) << name << " runs no task";
    EXPECT_EQ(cluster_->hosts().agentTaskResult(name, taskRan(host(name).task->id, ok)).value, 1);
  }
  size_t transitions(const std::string& name) {
    return cluster_->hosts().hostTransitions(admin_, name)->size();
  }
};

TEST_F(UpgradeTest, BatchesRespectMaxUnavailableAndWalkThePool) {
  const int64_t id = start(2);
  // Idle hosts drain at once and run the hook; the third waits for room.
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kReprovisioning);
  EXPECT_EQ(host("gpu-02").adminState, AdminState::kReprovisioning);
  EXPECT_EQ(host("gpu-03").adminState, AdminState::kAvailable);
  ASSERT_TRUE(host("gpu-01").task && host("gpu-01").task->hook);
  EXPECT_EQ(host("gpu-01").task->hook->profile, kProfile);
  EXPECT_FALSE(host("gpu-01").task->wipe.has_value()) << "an upgrade keeps the tenant's data";
  EXPECT_EQ(cluster_->hosts().advanceUpgrades().value, 0) << "two out already: nothing more starts";
  EXPECT_EQ(host("gpu-03").adminState, AdminState::kAvailable);

  finish("gpu-01", true);
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kAvailable);
  EXPECT_EQ(host("gpu-01").adminReason, "");
  EXPECT_EQ(stepOf(id, "gpu-01"), UpgradeHostState::kDone);
  EXPECT_EQ(cluster_->hosts().advanceUpgrades().value, 1);
  EXPECT_EQ(host("gpu-03").adminState, AdminState::kReprovisioning);

  finish("gpu-02", true);
  finish("gpu-03", true);
  EXPECT_EQ(cluster_->hosts().advanceUpgrades().value, 1);
  EXPECT_EQ(upgrade(id).state, UpgradeState::kSucceeded);
  for (const char* h : {"gpu-01", "gpu-02", "gpu-03"}) {
    EXPECT_EQ(host(h).adminState, AdminState::kAvailable) << h;
    EXPECT_TRUE(host(h).dedicatedTo.empty()) << h << " stays in the shared pool";
    EXPECT_EQ(stepOf(id, h), UpgradeHostState::kDone) << h;
    EXPECT_EQ(cluster_->hosts().hostTransitions(admin_, h)->back().reason,
              "upgrade " + std::to_string(id) + ": reprovisioned with profile " + kProfile);
  }
  // A finished upgrade frees the pool for the next one.
  EXPECT_TRUE(cluster_->hosts().startUpgrade(admin_, "shared", kProfile, 1, 0).ok());
}

TEST_F(UpgradeTest, AFailingHostStopsItAndLeavesTheRestUntouched) {
  const int64_t id = start(1);
  EXPECT_EQ(host("gpu-02").adminState, AdminState::kAvailable);
  finish("gpu-01", true);
  cluster_->hosts().advanceUpgrades();
  EXPECT_EQ(host("gpu-02").adminState, AdminState::kReprovisioning);
  const size_t before = transitions("gpu-03");

  finish("gpu-02", false);
  const model::Upgrade& u = upgrade(id);
  EXPECT_EQ(u.state, UpgradeState::kStopped);
  EXPECT_EQ(u.stoppedAt, "gpu-02");
  EXPECT_NE(u.reason.find("gpu-02"), std::string::npos) << u.reason;
  EXPECT_NE(u.reason.find("exit code 2"), std::string::npos) << u.reason;
  EXPECT_EQ(stepOf(id, "gpu-02"), UpgradeHostState::kFailed);
  EXPECT_EQ(host("gpu-02").adminState, AdminState::kFailed);

  cluster_->hosts().advanceUpgrades();
  EXPECT_EQ(host("gpu-03").adminState, AdminState::kAvailable);
  EXPECT_FALSE(host("gpu-03").task.has_value());
  EXPECT_EQ(transitions("gpu-03"), before) << "the third host was never touched";
  EXPECT_EQ(stepOf(id, "gpu-03"), UpgradeHostState::kSkipped);
}

TEST_F(UpgradeTest, AStepResumedByHandStopsTheUpgrade) {
  const int64_t id = start(1);
  ASSERT_TRUE(cluster_->hosts().resumeHost(admin_, "gpu-01").ok());
  cluster_->hosts().advanceUpgrades();
  EXPECT_EQ(upgrade(id).state, UpgradeState::kStopped);
  EXPECT_EQ(upgrade(id).stoppedAt, "gpu-01");
  EXPECT_NE(upgrade(id).reason.find("resumed by hand"), std::string::npos) << upgrade(id).reason;
  EXPECT_EQ(host("gpu-02").adminState, AdminState::kAvailable);
}

TEST_F(UpgradeTest, RunningWorkMayFinishWithoutADeadline) {
  const int64_t job = submit(alice_, 1);
  auto pass = cluster_->schedulePass();
  ASSERT_EQ(pass.value.placed.size(), 1u);
  const std::string busy = firstRank(cluster_->world().jobs.at(job)).host;
  // Only the busy host, so that it is the one drained first.
  ASSERT_TRUE(cluster_->hosts().dedicateHost(admin_, busy, "vision").ok());
  const int64_t id = start(1, "vision");
  EXPECT_EQ(host(busy).adminState, AdminState::kDraining);
  EXPECT_EQ(host(busy).drainDeadline, 0);
  clock_.advance(3'600'000);
  EXPECT_TRUE(cluster_->hosts().enforceDrains().value.empty())
      << "no deadline: nothing is preempted";
  EXPECT_EQ(upgrade(id).hosts.size(), 1u);
  EXPECT_EQ(stepOf(id, busy), UpgradeHostState::kRunning);
}

TEST_F(UpgradeTest, ATeamPoolKeepsItsOwnerAndSkipsFencedHosts) {
  ASSERT_TRUE(cluster_->hosts().dedicateHost(admin_, "gpu-02", "vision").ok());
  ASSERT_TRUE(cluster_->hosts().dedicateHost(admin_, "gpu-03", "vision").ok());
  ASSERT_TRUE(
      cluster_->hosts().setHostAdminState(admin_, "gpu-03", AdminState::kFailed, "bad fan").ok());
  const int64_t id = start(4, "vision");
  ASSERT_EQ(upgrade(id).hosts.size(), 2u) << "only the team's hosts";
  EXPECT_EQ(stepOf(id, "gpu-03"), UpgradeHostState::kSkipped);
  EXPECT_EQ(upgrade(id).hosts[1].reason, "host is failed at the start");
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kAvailable);
  finish("gpu-02", true);
  cluster_->hosts().advanceUpgrades();
  EXPECT_EQ(upgrade(id).state, UpgradeState::kSucceeded);
  EXPECT_EQ(host("gpu-02").dedicatedTo, "vision");
  EXPECT_EQ(host("gpu-03").adminState, AdminState::kFailed);
  // Members see their own team's upgrades and the shared pool's; another team's is not there.
  EXPECT_TRUE(cluster_->hosts().getUpgrade(alice_, id).ok());
  EXPECT_EQ(cluster_->hosts().getUpgrade(bob_, id).status().code(), Code::kNotFound);
  EXPECT_TRUE(cluster_->hosts().listUpgrades(bob_).empty());
}

TEST_F(UpgradeTest, BadInputIsRefusedAndChangesNothing) {
  auto fieldOf = [&](const Principal& p, const std::string& pool, const std::string& profile,
                     int maxUnavailable, int64_t deadline) {
    auto r = cluster_->hosts().startUpgrade(p, pool, profile, maxUnavailable, deadline);
    EXPECT_FALSE(r.ok());
    return std::pair(r.status().code(), r.status().field());
  };
  using P = std::pair<Code, std::string>;
  EXPECT_EQ(fieldOf(admin_, "", kProfile, 1, 0), P(Code::kInvalidArgument, "pool"));
  EXPECT_EQ(fieldOf(admin_, "Bad Pool", kProfile, 1, 0), P(Code::kInvalidArgument, "pool"));
  EXPECT_EQ(fieldOf(admin_, "nosuchteam", kProfile, 1, 0), P(Code::kNotFound, "pool"));
  EXPECT_EQ(fieldOf(admin_, "nlp", kProfile, 1, 0), P(Code::kInvalidArgument, "pool"))
      << "a pool without hosts";
  EXPECT_EQ(fieldOf(admin_, "shared", "gold", 1, 0), P(Code::kInvalidArgument, "profile"));
  EXPECT_EQ(fieldOf(admin_, "shared", "", 1, 0), P(Code::kInvalidArgument, "profile"));
  EXPECT_EQ(fieldOf(admin_, "shared", kProfile, 0, 0),
            P(Code::kInvalidArgument, "max_unavailable"));
  EXPECT_EQ(fieldOf(admin_, "shared", kProfile, 1, -1),
            P(Code::kInvalidArgument, "drain_deadline"));
  EXPECT_EQ(fieldOf(alice_, "shared", kProfile, 1, 0).first, Code::kPermissionDenied);
  EXPECT_EQ(fieldOf(bob_, "vision", kProfile, 1, 0).first, Code::kNotFound);
  EXPECT_TRUE(cluster_->world().upgrades.empty());
  for (const char* h : {"gpu-01", "gpu-02", "gpu-03"}) {
    EXPECT_EQ(host(h).adminState, AdminState::kAvailable);
    EXPECT_EQ(transitions(h), 0u);
  }

  const int64_t id = start(1);
  auto again = cluster_->hosts().startUpgrade(admin_, "shared", kProfile, 1, 0);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("upgrade " + std::to_string(id)), std::string::npos)
      << again.status().message();
  EXPECT_EQ(cluster_->world().upgrades.size(), 1u);
}

TEST_F(UpgradeTest, APoolWithNoHostToUpgradeIsRefused) {
  ASSERT_TRUE(cluster_->hosts().dedicateHost(admin_, "gpu-03", "nlp").ok());
  ASSERT_TRUE(
      cluster_->hosts().setHostAdminState(admin_, "gpu-03", AdminState::kRetired, "old").ok());
  auto r = cluster_->hosts().startUpgrade(admin_, "nlp", kProfile, 1, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("gpu-03: host is retired"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(cluster_->world().upgrades.empty());
}

// Driver minimums through the control plane: a job no host is new enough for waits saying which
// version it needs and the newest on offer, and runs once an upgraded host comes.
class DriverMinimumTest : public ClusterTest {
 protected:
  void joinWithDriver(const std::string& name, const std::string& driver) {
    model::Inventory inv = inventory(1);
    for (auto& g : inv.gpus) {
      g.driverVersion = driver;
      g.cudaVersion = "12.4";
    }
    auto jt = cluster_->hosts().createJoinToken(admin_, 3'600'000);
    ASSERT_TRUE(cluster_->hosts().joinHost(jt->value.secret, name, inv).ok());
    cluster_->agentConnected(name, &link_, inv, {});
  }
};

TEST_F(DriverMinimumTest, AJobNoHostIsNewEnoughForWaitsSayingSo) {
  joinWithDriver("old-01", "535.104.05");
  EXPECT_EQ(model::toJson(cluster_->world().hosts.at("old-01"))["driver_version"], "535.104.05");
  JobRequest r;
  r.command = {"train"};
  r.resources.gpus = 1;
  r.resources.minDriver = "550";
  auto refused = cluster_->submitJob(alice_, r);
  EXPECT_EQ(refused.status().field(), "min_driver") << "no host could ever run it";
  EXPECT_NE(refused.status().message().find("the newest is 535.104.05"), std::string::npos)
      << refused.status().toString();
  r.queueAnyway = true;  // for the newer host about to join
  auto job = cluster_->submitJob(alice_, r);
  ASSERT_TRUE(job.ok()) << job.status().toString();
  const int64_t id = job->value.id;
  EXPECT_TRUE(cluster_->schedulePass().value.placed.empty());
  auto wait = cluster_->waitOf(id);
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->kind, sched::WaitKind::kDriverTooOld);
  EXPECT_EQ(cluster_->waitReason(cluster_->world().jobs.at(id)),
            "needs driver >= 550; the newest among hosts team vision may use is 535.104.05");
  auto explain = cluster_->explainJob(alice_, id);
  ASSERT_TRUE(explain.ok());
  EXPECT_EQ(explain->dump().find("\"newest_version\":\"535.104.05\"") != std::string::npos, true)
      << explain->dump();

  joinWithDriver("new-01", "550.54.15");
  auto pass = cluster_->schedulePass();
  ASSERT_EQ(pass.value.placed.size(), 1u);
  EXPECT_EQ(firstRank(cluster_->world().jobs.at(id)).host, "new-01");
}

class UpgradeRestartTest : public DurableClusterTest {
 protected:
  void SetUp() override {
    DurableClusterTest::SetUp();
    start(options());
    bootstrap();
    for (const char* h : {"gpu-01", "gpu-02"}) keepJoinedHost(h, 1);
  }
  static ClusterOptions options() {
    ClusterOptions o = testOptions();
    withProfile(o);
    return o;
  }
};

TEST_F(UpgradeRestartTest, AnUpgradeGoesOnAfterARestart) {
  const int64_t id =
      keep(cluster_->hosts().startUpgrade(admin_, "shared", kProfile, 1, 0)).value.id;
  const int64_t task = host("gpu-01").task->id;

  start(options());  // allotd restarts mid-step
  ASSERT_TRUE(cluster_->world().upgrades.count(id));
  EXPECT_EQ(cluster_->world().upgrades.at(id).state, UpgradeState::kRunning);
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kReprovisioning);
  ASSERT_TRUE(host("gpu-01").handover.has_value());
  EXPECT_EQ(host("gpu-01").handover->upgradeId, id);
  for (const char* h : {"gpu-01", "gpu-02"})
    keep(cluster_->agentConnected(h, &link_, inventory(1), {}));
  EXPECT_EQ(keep(cluster_->hosts().advanceUpgrades()).value, 0) << "still waiting for gpu-01";

  keep(cluster_->hosts().agentTaskResult("gpu-01", taskRan(task, true)));
  keep(cluster_->hosts().advanceUpgrades());
  EXPECT_EQ(host("gpu-02").adminState, AdminState::kReprovisioning);

  start(options());  // and again, with the second step under way
  for (const char* h : {"gpu-01", "gpu-02"})
    keep(cluster_->agentConnected(h, &link_, inventory(1), {}));
  keep(cluster_->hosts().agentTaskResult("gpu-02", taskRan(host("gpu-02").task->id, true)));
  keep(cluster_->hosts().advanceUpgrades());
  start(options());
  const model::Upgrade& u = cluster_->world().upgrades.at(id);
  EXPECT_EQ(u.state, UpgradeState::kSucceeded);
  ASSERT_EQ(u.hosts.size(), 2u);
  EXPECT_EQ(u.hosts[0].state, UpgradeHostState::kDone);
  EXPECT_EQ(u.hosts[1].state, UpgradeHostState::kDone);
  EXPECT_GT(u.hosts[1].endedAt, 0);
}

}  // namespace
}  // namespace allot::control
