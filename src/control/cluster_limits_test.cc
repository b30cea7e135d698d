// Issue 18: no tenant or host exhausts what others share. The job limits, the CPU and memory
// floor, the bounded desired state, flapping agents, logs of ended jobs, inventories that grow,
// and webhook targets.

#include <nlohmann/json.hpp>

#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

class LimitsTest : public ClusterTest {
 protected:
  void adjustOptions(ClusterOptions& o) override {
    o.limits.maxActiveJobsPerUser = 3;
    o.limits.maxActiveJobsPerTeam = 4;
    o.webhookAllow = {"http://hooks.example.com/"};
  }
  Result<Change<model::Job>> submitWithEnv(const Principal& p, size_t envBytes, int gpus = 0) {
    JobRequest r;
    r.command = {"sleep", "3600"};
    r.resources.gpus = gpus;
    r.env["BIG"] = std::string(envBytes, 'x');
    return cluster_->submitJob(p, r);
  }
  nlohmann::json desired(const std::string& host) {
    return nlohmann::json::parse(cluster_->desiredMessage(host));
  }
};

TEST_F(LimitsTest, AUserAndATeamHoldAtMostTheirLimitOfLiveJobs) {
  for (int i = 0; i < 3; ++i) submitSleep(alice_, 0);
  auto fourth = cluster_->submitJob(alice_, JobRequest{.command = {"true"}});
  ASSERT_FALSE(fourth.ok());
  EXPECT_EQ(fourth.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(fourth.status().message().find("max_active_jobs_per_user"), std::string::npos);
  // Another team is not held up by alice's jobs.
  EXPECT_TRUE(cluster_->submitJob(bob_, JobRequest{.command = {"true"}}).ok());
  // A job that ends makes room.
  auto jobs = cluster_->listJobs(alice_, {});
  ASSERT_TRUE(cluster_->cancelJob(alice_, jobs.front().id).ok());
  EXPECT_TRUE(cluster_->submitJob(alice_, JobRequest{.command = {"true"}}).ok());
  // The team's limit counts every member: a second member of vision gets one more, then none.
  Principal c = addUser("carol", "vision", model::Role::kMember);
  EXPECT_TRUE(cluster_->submitJob(c, JobRequest{.command = {"true"}}).ok());
  auto overTeam = cluster_->submitJob(c, JobRequest{.command = {"true"}});
  ASSERT_FALSE(overTeam.ok());
  EXPECT_NE(overTeam.status().message().find("max_active_jobs_per_team"), std::string::npos);
}

class ByteLimitsTest : public ClusterTest {
 protected:
  void adjustOptions(ClusterOptions& o) override { o.limits.maxActiveJobBytesPerUser = 1 << 20; }
};

TEST_F(ByteLimitsTest, AUserHoldsAtMostTheirBudgetOfCommandsAndEnvironments) {
  // Four jobs of 250 KiB fit in 1 MiB; the fifth does not, and what ends makes room.
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    JobRequest r;
    r.command = {"sleep", "3600"};
    r.env["BIG"] = std::string(250 << 10, 'x');
    auto c = cluster_->submitJob(alice_, r);
    ASSERT_TRUE(c.ok()) << c.status().toString();
    ids.push_back(c->value.id);
  }
  JobRequest r;
  r.command = {"sleep", "3600"};
  r.env["BIG"] = std::string(250 << 10, 'x');
  auto fifth = cluster_->submitJob(alice_, r);
  ASSERT_FALSE(fifth.ok());
  EXPECT_NE(fifth.status().message().find("max_active_job_mib_per_user"), std::string::npos);
  EXPECT_TRUE(cluster_->submitJob(alice_, JobRequest{.command = {"true"}}).ok());
  ASSERT_TRUE(cluster_->cancelJob(alice_, ids[0]).ok());
  EXPECT_TRUE(cluster_->submitJob(alice_, r).ok());
}

TEST_F(ClusterTest, JobsAskingNothingAreCountedAtTheFloor) {
  // 16 CPUs at the default floor of 100 millicpu: 160 such jobs fit on the host, not 170.
  joinHost("gpu-01", 0);
  for (int i = 0; i < 170; ++i) {
    auto c = cluster_->submitJob(i % 2 ? alice_ : bob_, JobRequest{.command = {"true"}});
    ASSERT_TRUE(c.ok()) << c.status().toString();
  }
  EXPECT_EQ(place().size(), 160u);
  // The floor is only what the scheduler counts: the agent is not told to limit the job to it.
  auto d = nlohmann::json::parse(cluster_->desiredMessage("gpu-01"));
  EXPECT_EQ(d["jobs"][0]["cpu_millis"], 0);
  EXPECT_EQ(d["jobs"][0]["memory_mib"], 0);
}

TEST_F(LimitsTest, TheDesiredStateStaysBoundedHoweverLargeTheJobs) {
  joinHost("gpu-01", 0);
  // Three users of two teams, 250 KiB of environment per job, all placed on one host.
  Principal d = addUser("dave", "nlp", model::Role::kMember);
  std::vector<int64_t> ids;
  for (const Principal* p : {&alice_, &bob_, &d}) {
    for (int i = 0; i < 3; ++i) {
      auto c = submitWithEnv(*p, 250 << 10);
      if (c.ok()) ids.push_back(c->value.id);
    }
  }
  ASSERT_GE(ids.size(), 7u);
  place();
  // Every job is listed, within the budget.
  const std::string message = cluster_->desiredMessage("gpu-01");
  EXPECT_LT(message.size(), model::kDesiredSpecBudget + (64 << 10));
  auto json = nlohmann::json::parse(message);
  EXPECT_EQ(json["jobs"].size(), ids.size());
  // Jobs the agent has started no longer carry their command and environment.
  for (int64_t id : ids)
    cluster_->agentStatus("gpu-01", {{id, model::ActualState::kRunning, 1, {}, {}, 1, 0, ""}});
  auto started = desired("gpu-01");
  for (const auto& j : started["jobs"]) {
    EXPECT_TRUE(j["command"].empty());
    EXPECT_FALSE(j.contains("deferred"));
    EXPECT_FALSE(j["env"].contains("BIG"));
  }
  // Cancelled jobs do not carry them either, even before the agent confirms.
  for (int64_t id : ids) {
    const Principal& owner = cluster_->world().jobs.at(id).user == "alice" ? alice_
                             : cluster_->world().jobs.at(id).user == "bob" ? bob_
                                                                           : d;
    ASSERT_TRUE(cluster_->cancelJob(owner, id).ok());
  }
  EXPECT_LT(cluster_->desiredMessage("gpu-01").size(), 16u << 10);
}

TEST_F(ClusterTest, SpecsBeyondTheBudgetAreDeferredUntilEarlierJobsStart) {
  joinHost("gpu-01", 0);
  std::vector<int64_t> ids;
  // 40 jobs of 250 KiB: 10 MiB of environments, more than one message carries.
  for (int i = 0; i < 40; ++i) {
    JobRequest r;
    r.command = {"sleep", "3600"};
    r.env["BIG"] = std::string(250 << 10, 'a' + i % 26);
    auto c = cluster_->submitJob(i % 2 ? alice_ : bob_, r);
    ASSERT_TRUE(c.ok()) << c.status().toString();
    ids.push_back(c->value.id);
  }
  place();
  auto first = nlohmann::json::parse(cluster_->desiredMessage("gpu-01"));
  ASSERT_EQ(first["jobs"].size(), 40u);
  size_t carried = 0, deferred = 0;
  for (const auto& j : first["jobs"]) {
    if (j.value("deferred", false)) {
      ++deferred;
      EXPECT_FALSE(j.contains("command"));
    } else {
      ++carried;
      EXPECT_EQ(j["env"]["BIG"].get<std::string>().size(), 250u << 10);
      // Its start sends the host its desired state again, with the specs held back.
      auto started = cluster_->agentStatus(
          "gpu-01", {{j["id"].get<int64_t>(), model::ActualState::kRunning, 1, {}, {}, 1, 0, ""}});
      EXPECT_TRUE(started.pushHosts.count("gpu-01"));
    }
  }
  EXPECT_GT(carried, 0u);
  EXPECT_GT(deferred, 0u);
  // The next message carries the ones left out.
  auto second = nlohmann::json::parse(cluster_->desiredMessage("gpu-01"));
  size_t nowCarried = 0;
  for (const auto& j : second["jobs"]) {
    if (j.contains("command") && !j["command"].empty()) ++nowCarried;
  }
  EXPECT_EQ(nowCarried, std::min<size_t>(deferred, carried));
}

// Liveness of one host, gpu-01, running one job of alice's.
class LivenessTest : public ClusterTest {
 protected:
  // The agent drops, stays away for `ms`, and reconnects still running `run`.
  void awayFor(int64_t ms, const model::ActualJob& run) {
    cluster_->agentDisconnected("gpu-01", &link_);
    clock_.advance(ms);
    cluster_->agentConnected("gpu-01", &link_, inventory(1), {run});
  }
  // The agent stays connected for `beats` status reports `everyMs` apart, liveness checked after
  // each.
  void stayUp(const model::ActualJob& run, int beats, int64_t everyMs) {
    for (int i = 0; i < beats; ++i) {
      clock_.advance(everyMs);
      cluster_->agentStatus("gpu-01", {run});
      cluster_->checkLiveness();
    }
  }
};

TEST_F(LivenessTest, AFlappingAgentIsCountedUnreachable) {
  const model::ActualJob run = runningJob();
  const int64_t a = run.id;
  // The agent drops and comes back every second, never staying up: each reconnect used to
  // reset the unreachable clock, so its jobs were never declared lost.
  for (int i = 0; i < 70; ++i) {
    awayFor(500, run);
    clock_.advance(500);
    cluster_->checkLiveness();
  }
  auto j = cluster_->getJob(alice_, a);
  EXPECT_EQ(j->state, JobState::kLost);
  EXPECT_NE(j->reason.find("flapping"), std::string::npos) << j->reason;
}

TEST_F(LivenessTest, AnAgentThatStaysUpEndsItsOutage) {
  const model::ActualJob run = runningJob();
  const int64_t a = run.id;
  awayFor(40'000, run);
  // Up for three heartbeats: the outage is over, and a later short drop starts a new one.
  stayUp(run, 4, 5'000);
  cluster_->agentDisconnected("gpu-01", &link_);
  clock_.advance(20'000);
  cluster_->checkLiveness();
  EXPECT_EQ(cluster_->getJob(alice_, a)->state, JobState::kRunning);
}

TEST_F(LivenessTest, AHostThatComesBackAndStaysIsNotFlapping) {
  const model::ActualJob run = runningJob();
  const int64_t a = run.id;
  // Away for most of --lost-after (60 s here), then back for good: its jobs stay.
  awayFor(55'000, run);
  stayUp(run, 6, 2'000);
  EXPECT_EQ(cluster_->getJob(alice_, a)->state, JobState::kRunning);
}

TEST_F(ClusterTest, AHostBackFromALongOutageIsNotFlapping) {
  joinHost("gpu-01", 1);
  cluster_->agentDisconnected("gpu-01", &link_);
  clock_.advance(70'000);  // longer than --lost-after
  cluster_->checkLiveness();
  cluster_->agentConnected("gpu-01", &link_, inventory(1), {});
  // Work placed right after it came back is not lost for the outage that ended.
  int64_t a = submit(alice_, 1);
  place();
  cluster_->agentStatus("gpu-01", {{a, model::ActualState::kRunning, 1, {}, {}, 1, 0, ""}});
  clock_.advance(1'000);
  cluster_->checkLiveness();
  EXPECT_EQ(cluster_->getJob(alice_, a)->state, JobState::kRunning);
}

TEST_F(ClusterTest, AnEndedJobTakesNoMoreOutput) {
  joinHost("gpu-01", 1);
  int64_t a = submit(alice_, 1);
  place();
  EXPECT_TRUE(cluster_->agentLog("gpu-01", {a, 0, "hello\n"}).ok());
  model::ActualJob done{a, model::ActualState::kExited, 1, 0, {}, 1, 2, ""};
  cluster_->agentStatus("gpu-01", {done});
  ASSERT_EQ(cluster_->getJob(alice_, a)->state, JobState::kSucceeded);
  auto late = cluster_->agentLog("gpu-01", {a, 6, std::string(1 << 20, 'x')});
  EXPECT_EQ(late.code(), Code::kFailedPrecondition);
  EXPECT_EQ(logs_->size(a), 6);
}

TEST_F(ClusterTest, AnAdmittedHostThatClaimsMoreHardwareIsFenced) {
  joinHost("gpu-01", 2);
  model::Inventory bigger = inventory(16);
  for (auto& g : bigger.gpus) g.model = "H100";
  cluster_->agentDisconnected("gpu-01", &link_);
  cluster_->agentConnected("gpu-01", &link_, bigger, {});
  const auto& h = cluster_->world().hosts.at("gpu-01");
  EXPECT_EQ(h.adminState, model::AdminState::kMaintenance);
  EXPECT_NE(h.adminReason.find("inventory changed"), std::string::npos) << h.adminReason;
  // No other team's job is sent to it.
  submitSleep(bob_, 8);
  EXPECT_TRUE(place().empty());
  // Losing a GPU is not growth: the host stays in service.
  joinHost("gpu-02", 2);
  cluster_->agentConnected("gpu-02", &link_, inventory(1), {});
  EXPECT_EQ(cluster_->world().hosts.at("gpu-02").adminState, model::AdminState::kAvailable);
}

// Attack: a host's credential reports no CPUs and no memory (as an agent that could not read
// them would), then 4,096 CPUs and 64 TiB. The second is growth over what the host had, fenced.
TEST_F(ClusterTest, ReportingNothingFirstDoesNotLetAHostGrowUnfenced) {
  joinHost("gpu-01", 2);
  model::Inventory nothing = inventory(2);
  nothing.cpus = 0;
  nothing.memoryMib = 0;
  cluster_->agentDisconnected("gpu-01", &link_);
  cluster_->agentConnected("gpu-01", &link_, nothing, {});
  EXPECT_EQ(cluster_->world().hosts.at("gpu-01").adminState, model::AdminState::kAvailable);
  EXPECT_EQ(cluster_->world().hosts.at("gpu-01").cpus, 16) << "the last known figure stays";
  model::Inventory huge = inventory(2);
  huge.cpus = 4096;
  huge.memoryMib = int64_t{64} << 20;
  cluster_->agentDisconnected("gpu-01", &link_);
  cluster_->agentConnected("gpu-01", &link_, huge, {});
  const auto& h = cluster_->world().hosts.at("gpu-01");
  EXPECT_EQ(h.adminState, model::AdminState::kMaintenance);
  EXPECT_NE(h.adminReason.find("4096 CPUs, not 16"), std::string::npos) << h.adminReason;
}

// Attack: a host's credential reconnects again and again, each time claiming a little more GPU
// memory and memory than the time before, under the growth each hello may show. Hellos are
// measured against the figures allotd admitted, so the steps do not add up: the second is over
// the tolerance of those, and fenced. (Before, twenty steps reached 40% more, unfenced.) Once an
// admin resumes the host, what it claimed is the new mark.
TEST_F(ClusterTest, GrowthWithinTheTolerancesDoesNotAddUpAcrossReconnections) {
  joinHost("gpu-01", 2);
  model::Inventory claim = inventory(2);
  auto hello = [&](const model::Inventory& inv) {
    cluster_->agentDisconnected("gpu-01", &link_);
    cluster_->agentConnected("gpu-01", &link_, inv, {});
    return cluster_->world().hosts.at("gpu-01");
  };
  auto claimMore = [&] {
    for (auto& g : claim.gpus) g.memoryMib += g.memoryMib / 60;  // 1.7% more than the last
    claim.memoryMib += claim.memoryMib / 25;                     // 4% more
    return hello(claim);
  };
  const model::Host first = claimMore();
  EXPECT_EQ(first.adminState, model::AdminState::kAvailable) << first.adminReason;
  EXPECT_EQ(first.gpus[0].memoryMib, claim.gpus[0].memoryMib);  // within the tolerance: taken
  const model::Host second = claimMore();
  EXPECT_EQ(second.adminState, model::AdminState::kMaintenance);
  EXPECT_NE(second.adminReason.find("more memory on GPU 0"), std::string::npos)
      << second.adminReason;

  ASSERT_TRUE(cluster_->hosts().resumeHost(admin_, "gpu-01").ok());
  EXPECT_EQ(hello(claim).adminState, model::AdminState::kAvailable);
  EXPECT_EQ(claimMore().adminState, model::AdminState::kAvailable);  // one step over the new mark
  EXPECT_EQ(claimMore().adminState, model::AdminState::kMaintenance);
}

// Figures that dip (a driver or kernel reserving a little more for a while) and come back are
// not growth: the host keeps serving, with its figures back.
TEST_F(ClusterTest, FiguresThatDipAndComeBackAreNotGrowth) {
  joinHost("gpu-01", 2);
  model::Inventory dipped = inventory(2);
  for (auto& g : dipped.gpus) g.memoryMib -= g.memoryMib / 100;
  dipped.memoryMib -= dipped.memoryMib / 100;
  for (const model::Inventory& inv : {dipped, inventory(2)}) {
    cluster_->agentDisconnected("gpu-01", &link_);
    cluster_->agentConnected("gpu-01", &link_, inv, {});
    const auto& h = cluster_->world().hosts.at("gpu-01");
    EXPECT_EQ(h.adminState, model::AdminState::kAvailable) << h.adminReason;
    EXPECT_EQ(h.memoryMib, inv.memoryMib);
    EXPECT_EQ(h.gpus[1].memoryMib, inv.gpus[1].memoryMib);
  }
}

// A retired host keeps its credential while a job still runs there (retiring leaves running work
// alone, and it reports through it); once the last one ends, the credential goes, so the
// decommissioned machine cannot go on speaking as the host.
TEST_F(ClusterTest, ARetiredHostsCredentialEndsWithItsLastJob) {
  joinHost("gpu-01", 1);
  int64_t a = submit(alice_, 1);
  place();
  ASSERT_TRUE(cluster_->hosts()
                  .setHostAdminState(admin_, "gpu-01", model::AdminState::kRetired, "old")
                  .ok());
  auto credentials = [&] {
    return std::count_if(cluster_->world().tokens.begin(), cluster_->world().tokens.end(),
                         [](const auto& t) { return t.second.owner == "host:gpu-01"; });
  };
  cluster_->hosts().enforceDrains();
  EXPECT_EQ(credentials(), 1) << "its running job still reports through it";
  cluster_->agentStatus("gpu-01", {{a, model::ActualState::kExited, 1, 0, {}, 1, 2, ""}});
  ASSERT_EQ(cluster_->getJob(alice_, a)->state, JobState::kSucceeded);
  auto revoked = cluster_->hosts().enforceDrains();
  EXPECT_EQ(credentials(), 0);
  EXPECT_FALSE(revoked.batch.empty()) << "the revocation is written, not only forgotten";
  EXPECT_TRUE(cluster_->hosts().enforceDrains().batch.empty()) << "and done once";
  // Nor can a join token make the name live again: that takes an admin's reset-credential.
  auto jt = cluster_->hosts().createJoinToken(admin_, 3'600'000);
  ASSERT_TRUE(jt.ok());
  EXPECT_EQ(cluster_->hosts().joinHost(jt->value.secret, "gpu-01", inventory(1)).status().code(),
            Code::kAlreadyExists);
}

TEST_F(ClusterTest, AHelloClaimingAbsurdHardwareIsRefused) {
  model::Inventory huge = inventory(0);
  for (int i = 0; i < 150; ++i)
    huge.gpus.push_back({i, "GPU-" + std::to_string(i), i, "H100", 81920, 0, "", "", "", false});
  auto parsed = model::inventoryFromJson(model::toJson(huge));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().field(), "inventory");
  model::Inventory dup = inventory(2);
  dup.gpus[1].index = 0;
  EXPECT_FALSE(model::inventoryFromJson(model::toJson(dup)).ok());
  model::Inventory cpus = inventory(1);
  cpus.cpus = 1'000'000;
  EXPECT_FALSE(model::inventoryFromJson(model::toJson(cpus)).ok());
  model::Inventory memory = inventory(1);
  memory.gpus[0].memoryMib = -5;
  EXPECT_FALSE(model::inventoryFromJson(model::toJson(memory)).ok());
  EXPECT_TRUE(model::inventoryFromJson(model::toJson(inventory(8))).ok());
}

TEST_F(LimitsTest, WebhooksGoOnlyWhereAdminsAllow) {
  IdlePolicyUpdate u;
  u.webhook = "http://127.0.0.1:7070/api/v1/jobs";
  auto loopback = cluster_->idle().setPolicy(admin_, "vision", "", u);
  ASSERT_FALSE(loopback.ok());
  EXPECT_EQ(loopback.status().field(), "webhook");
  u.webhook = "http://hooks.example.com.evil.net/x";
  EXPECT_FALSE(cluster_->idle().setPolicy(admin_, "vision", "", u).ok());
  for (const char* escape :
       {"http://hooks.example.com/a/../../admin", "http://hooks.example.com/%2E%2E/admin",
        "http://hooks.example.com/."}) {
    u.webhook = escape;
    EXPECT_FALSE(cluster_->idle().setPolicy(admin_, "vision", "", u).ok()) << escape;
  }
  u.webhook = "http://hooks.example.com/allot?key=1";
  EXPECT_TRUE(cluster_->idle().setPolicy(admin_, "vision", "", u).ok());
  u.webhook = "";  // clearing is always allowed
  EXPECT_TRUE(cluster_->idle().setPolicy(admin_, "vision", "", u).ok());
}

TEST_F(ClusterTest, WithNoAllowListNoWebhookIsAccepted) {
  IdlePolicyUpdate u;
  u.webhook = "http://hooks.example.com/x";
  auto r = cluster_->idle().setPolicy(admin_, "vision", "", u);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("webhook_allow"), std::string::npos);
}

}  // namespace
}  // namespace allot::control
