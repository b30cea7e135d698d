// Gang (multi-host) jobs through the control plane: placement on distinct hosts, each rank's
// desired state and rendezvous environment, outcomes that end the gang, and logs per rank.

#include <gtest/gtest.h>

#include "control/cluster.h"
#include "control/cluster_test_fixture.h"
#include "model/json.h"
#include "store/documents.h"

namespace allot::control {
namespace {

using model::RankState;

class GangTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    joinHost("gpu-a", 2);
    joinHost("gpu-b", 2);
  }

  // A 2-host x 2-GPU gang of alice's, placed.
  struct Gang {
    int64_t id = 0;
    std::string a, b;  // the hosts of rank 0 and rank 1
  };
  Gang placedGang() {
    int64_t id = submitGang(alice_, 2, 2);
    place();
    auto j = job(id);
    return {id, j.ranks.at(0).host, j.ranks.at(1).host};
  }
  // The same, with both ranks reported running.
  Gang runningGang() {
    Gang g = placedGang();
    cluster_->agentStatus(g.a, {rank0Running(g.id)});
    cluster_->agentStatus(g.b, {report(g.id, ActualState::kRunning)});
    return g;
  }

  int64_t submitGang(const Principal& p, int hosts, int gpus, bool preemptible = false) {
    JobRequest r = request({"torchrun", "train.py"}, gpus, preemptible);
    r.resources.hosts = hosts;
    return submitRequest(p, r);
  }

  // Places what is queued and makes it durable; returns the hosts told about it.
  std::set<std::string> place() {
    auto pass = cluster_->schedulePass();
    cluster_->passDurable(pass.value);
    return pass.pushHosts;
  }

  // The desired entry of `id` in the host's desired state, or null.
  nlohmann::json desired(const std::string& host, int64_t id) {
    auto msg = nlohmann::json::parse(cluster_->desiredMessage(host));
    for (const auto& j : msg.at("jobs")) {
      if (j.at("id").get<int64_t>() == id) return j;
    }
    return nullptr;
  }

  ActualJob report(int64_t id, ActualState state, std::optional<int> code = {},
                   std::optional<int> signal = {}) {
    return {id, state, 1, code, signal, clock_.nowMs(), 0, ""};
  }
  // Rank 0 running, with the port its agent chose, as an agent reports it.
  ActualJob rank0Running(int64_t id) {
    auto a = report(id, ActualState::kRunning);
    a.masterPort = 29400;
    return a;
  }
};

TEST_F(GangTest, AGangIsPlacedOnDistinctHostsAndHoldsEveryRanksGpus) {
  int64_t id = submitGang(alice_, 2, 2);
  auto pushed = place();
  auto j = job(id);
  EXPECT_EQ(j.state, JobState::kScheduled);
  ASSERT_EQ(j.ranks.size(), 2u);
  EXPECT_NE(j.ranks[0].host, j.ranks[1].host);
  const nlohmann::json shown = model::toJson(j);  // rank 0 stays in the flat fields the API shows
  EXPECT_EQ(shown["host"], j.ranks[0].host);
  EXPECT_EQ(shown["gpu_indices"], j.ranks[0].gpuIndices);
  EXPECT_EQ(j.ranks[1].gpuUuids.size(), 2u);
  EXPECT_EQ(pushed, (std::set<std::string>{"gpu-a", "gpu-b"}));
  // Nothing else fits on either host while the gang holds them.
  EXPECT_EQ(cluster_->hosts().allocations(admin_, "gpu-a").size(), 2u);
  EXPECT_EQ(cluster_->hosts().allocations(admin_, "gpu-b").size(), 2u);
  int64_t other = submit(bob_, 1);
  place();
  EXPECT_EQ(job(other).state, JobState::kQueued);
}

TEST_F(GangTest, EachHostIsToldItsRankAndTheRendezvousOnceRankZeroChoseItsPort) {
  int64_t id = submitGang(alice_, 2, 2);
  place();
  auto j = job(id);
  // Rank 0's agent picks a free port; rank 1 is held back until it has.
  auto first = desired(j.ranks[0].host, id);
  EXPECT_TRUE(first.value("choose_master_port", false));
  EXPECT_FALSE(first.at("env").contains("MASTER_PORT"));
  EXPECT_TRUE(desired(j.ranks[1].host, id).value("deferred", false));
  auto chosen = report(id, ActualState::kRunning);
  chosen.masterPort = 41234;
  auto c = cluster_->agentStatus(j.ranks[0].host, {chosen});
  EXPECT_EQ(c.pushHosts, (std::set<std::string>{j.ranks[0].host, j.ranks[1].host}));
  EXPECT_NE(findOp<store::PutJob>(c), nullptr) << "the port is kept with the job";
  EXPECT_EQ(job(id).masterPort, 41234);
  EXPECT_EQ(model::toJson(job(id))["master_port"], 41234);
  auto d = desired(j.ranks[1].host, id);
  ASSERT_FALSE(d.is_null());
  const auto& env = d.at("env");
  EXPECT_EQ(env.at("RANK"), "1");
  EXPECT_EQ(env.at("ALLOT_RANK"), "1");
  EXPECT_EQ(env.at("NODE_RANK"), "1");
  EXPECT_EQ(env.at("LOCAL_RANK"), "0");
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "1");
  EXPECT_EQ(env.at("WORLD_SIZE"), "2");
  // No address reported by rank 0's agent: the name it joined with.
  EXPECT_EQ(env.at("MASTER_ADDR"), j.ranks[0].host);
  EXPECT_EQ(env.at("MASTER_PORT"), "41234");
  EXPECT_EQ(env.at("PET_MASTER_PORT"), "41234");
  EXPECT_EQ(env.at("PET_NNODES"), "2");
  EXPECT_EQ(env.at("PET_NODE_RANK"), "1");
  EXPECT_EQ(env.at("ALLOT_HOSTS"), j.ranks[0].host + "," + j.ranks[1].host);
  EXPECT_EQ(d.at("gpu_uuids"), j.ranks[1].gpuUuids);
  EXPECT_FALSE(d.at("cancel").get<bool>());
}

TEST_F(GangTest, ARankZeroFirstSeenEndedStillGivesItsPortAndTheOthersStart) {
  // A rank 0 that ends at once is never seen running: its exit carries the port.
  int64_t id = submitGang(alice_, 2, 2);
  place();
  auto j = job(id);
  auto ended = report(id, ActualState::kExited, 0);
  ended.masterPort = 41000;
  auto c = cluster_->agentStatus(j.ranks[0].host, {ended});
  EXPECT_TRUE(c.pushHosts.count(j.ranks[1].host));
  auto d = desired(j.ranks[1].host, id);
  EXPECT_FALSE(d.value("deferred", false)) << d.dump();
  EXPECT_EQ(d.at("env").at("MASTER_PORT"), "41000");

  // One that ended without a port (its agent restarted in between): the others are not held
  // back for ever.
  int64_t next = submitGang(alice_, 2, 2);
  cluster_->agentStatus(j.ranks[1].host, {report(id, ActualState::kExited, 0)});
  place();
  auto k = job(next);
  ASSERT_EQ(k.ranks.size(), 2u);
  cluster_->agentStatus(k.ranks[0].host, {report(next, ActualState::kExited, 0)});
  auto later = desired(k.ranks[1].host, next);
  EXPECT_FALSE(later.value("deferred", false)) << later.dump();
  EXPECT_FALSE(later.at("env").contains("MASTER_PORT")) << later.dump();
  EXPECT_FALSE(later.value("choose_master_port", false)) << later.dump();
}

TEST_F(GangTest, ARankZeroRunningWithoutAPortFailsTheGangInsteadOfHoldingTheOthersForEver) {
  // An older agent, or one restarted before it reported the port it chose: running, no port.
  int64_t id = submitGang(alice_, 2, 2);
  place();
  auto j = job(id);
  auto c = cluster_->agentStatus(j.ranks[0].host, {report(id, ActualState::kRunning)});
  EXPECT_TRUE(c.pushHosts.count(j.ranks[1].host));
  EXPECT_TRUE(desired(j.ranks[0].host, id).at("cancel").get<bool>()) << "rank 0 is stopped";
  EXPECT_NE(job(id).reason.find("reported no rendezvous port"), std::string::npos);
  cluster_->agentStatus(j.ranks[0].host, {report(id, ActualState::kExited, 143)});
  cluster_->agentStatus(j.ranks[1].host, {report(id, ActualState::kExited, 0)});
  auto ended = job(id);
  EXPECT_EQ(ended.state, JobState::kFailed);
  EXPECT_NE(ended.reason.find("rank 0 on " + j.ranks[0].host + " reported no rendezvous port"),
            std::string::npos)
      << ended.reason;
}

TEST_F(GangTest, MasterAddrIsTheAddressRankZerosAgentReportedUnlessOnlyItsOwnMachineCouldUseIt) {
  auto reconnect = [&](const std::string& name, const std::string& address) {
    auto inv = inventory(2);
    inv.address = address;
    cluster_->agentConnected(name, &link_, inv, {});
  };
  // A gang placed and its rank 0 running with a port; what rank 1 is told; then it ends.
  auto masterAddrOfANewGang = [&](std::string* rank0) {
    int64_t id = submitGang(alice_, 2, 2);
    place();
    auto j = job(id);
    *rank0 = j.ranks.at(0).host;
    auto chosen = report(id, ActualState::kRunning);
    chosen.masterPort = 40000;
    cluster_->agentStatus(j.ranks[0].host, {chosen});
    const std::string addr = desired(j.ranks[1].host, id).at("env").at("MASTER_ADDR");
    for (const auto& k : j.ranks)
      cluster_->agentStatus(k.host, {report(id, ActualState::kExited, 0)});
    EXPECT_TRUE(model::isTerminal(job(id).state));
    return addr;
  };
  std::string rank0;
  reconnect("gpu-a", "10.0.0.1");
  reconnect("gpu-b", "10.0.0.2");
  const std::string first = masterAddrOfANewGang(&rank0);
  EXPECT_EQ(first, host(rank0).address);

  // gpu-a's agent sits beside allotd and reached it over loopback, gpu-b's did not: loopback
  // would send rank 1 to itself, so the name gpu-a joined with is the better guess.
  reconnect("gpu-a", "127.0.0.1");
  const std::string addr = masterAddrOfANewGang(&rank0);
  EXPECT_EQ(addr, rank0 == "gpu-a" ? "gpu-a" : "10.0.0.2");

  // Both on loopback (one machine, as in the integration tests): loopback it is.
  reconnect("gpu-b", "127.0.0.1");
  EXPECT_EQ(masterAddrOfANewGang(&rank0), "127.0.0.1");
}

TEST_F(GangTest, RunningOnceEveryRankRunsAndSucceedsWhenAllExitZero) {
  auto [id, a, b] = placedGang();
  cluster_->agentStatus(a, {rank0Running(id)});
  EXPECT_EQ(job(id).state, JobState::kScheduled);  // rank 1 has not started yet
  cluster_->agentStatus(b, {report(id, ActualState::kRunning)});
  EXPECT_EQ(job(id).state, JobState::kRunning);
  cluster_->agentStatus(b, {report(id, ActualState::kExited, 0)});
  EXPECT_EQ(job(id).state, JobState::kRunning);  // rank 0 still runs
  EXPECT_EQ(job(id).ranks[1].state, RankState::kExited);
  cluster_->agentStatus(a, {report(id, ActualState::kExited, 0)});
  auto j = job(id);
  EXPECT_EQ(j.state, JobState::kSucceeded);
  EXPECT_EQ(j.exitCode, 0);
  EXPECT_TRUE(cluster_->hosts().allocations(admin_, a).empty());
  EXPECT_TRUE(cluster_->hosts().allocations(admin_, b).empty());
}

TEST_F(GangTest, ARankFailingStopsTheOthersAndFailsTheJobNamingIt) {
  auto [id, a, b] = runningGang();
  auto c = cluster_->agentStatus(b, {report(id, ActualState::kExited, 3)});
  EXPECT_TRUE(c.pushHosts.count(a));
  EXPECT_EQ(job(id).state, JobState::kRunning);  // until rank 0 has stopped too
  EXPECT_TRUE(desired(a, id).at("cancel").get<bool>());
  EXPECT_EQ(desired(a, id).at("grace_ms"), cluster_->options().cancelGraceMs);
  // Rank 0 dies of the SIGTERM; the job's end is rank 1's doing.
  cluster_->agentStatus(a, {report(id, ActualState::kExited, {}, 15)});
  auto j = job(id);
  EXPECT_EQ(j.state, JobState::kFailed);
  EXPECT_EQ(j.reason, "rank 1 on " + b + " exited with code 3");
  EXPECT_EQ(j.exitCode, 3);
  EXPECT_EQ(j.ranks[0].signal, 15);
}

TEST_F(GangTest, ARankThatIsLostLosesTheGang) {
  auto [id, a, b] = runningGang();
  // gpu-b's agent restarted and forgot the rank: that rank is lost, and so is the gang.
  cluster_->agentConnected(b, &link_, inventory(2), {});
  EXPECT_TRUE(desired(a, id).at("cancel").get<bool>());
  cluster_->agentStatus(a, {report(id, ActualState::kExited, {}, 15)});
  auto j = job(id);
  EXPECT_EQ(j.state, JobState::kLost);
  EXPECT_NE(j.reason.find("rank 1 on " + b + " lost"), std::string::npos) << j.reason;
}

TEST_F(GangTest, AnUnreachableHostLosesTheWholeGang) {
  auto [id, a, b] = runningGang();
  cluster_->agentDisconnected(b, &link_);
  clock_.advance(61'000);
  cluster_->agentStatus(a, {rank0Running(id)});  // a stays in touch
  auto c = cluster_->checkLiveness();
  auto j = job(id);
  EXPECT_EQ(j.state, JobState::kLost);
  EXPECT_NE(j.reason.find("rank 1 on " + b), std::string::npos) << j.reason;
  EXPECT_TRUE(c.pushHosts.count(a));  // rank 0 leaves gpu-a's desired state and is stopped
  EXPECT_TRUE(desired(a, id).is_null());
  EXPECT_TRUE(cluster_->hosts().allocations(admin_, a).empty());
}

TEST_F(GangTest, CancelStopsEveryRank) {
  auto [id, a, b] = runningGang();
  auto c = cluster_->cancelJob(alice_, id);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->pushHosts, (std::set<std::string>{a, b}));
  EXPECT_TRUE(desired(a, id).at("cancel").get<bool>());
  EXPECT_TRUE(desired(b, id).at("cancel").get<bool>());
  cluster_->agentStatus(b, {report(id, ActualState::kExited, {}, 15)});
  EXPECT_EQ(job(id).state, JobState::kRunning);
  cluster_->agentStatus(a, {report(id, ActualState::kExited, {}, 15)});
  auto j = job(id);
  EXPECT_EQ(j.state, JobState::kCancelled);
  EXPECT_EQ(j.reason.rfind("cancel requested by alice", 0), 0u) << j.reason;
}

TEST_F(GangTest, PreemptionStopsEveryRankAndRequeuesThePreemptibleGang) {
  QuotaUpdate q;
  q.guaranteed = std::map<std::string, int>{{"", 2}};
  ASSERT_TRUE(cluster_->quotas().setTeam(admin_, "nlp", q).ok());
  int64_t id = submitGang(alice_, 2, 2, /*preemptible=*/true);  // borrows all four GPUs
  place();
  auto j = job(id);
  ASSERT_EQ(j.state, JobState::kScheduled);
  const auto a = j.ranks[0].host, b = j.ranks[1].host;
  cluster_->agentStatus(a, {rank0Running(id)});
  cluster_->agentStatus(b, {report(id, ActualState::kRunning)});
  int64_t claim = submit(bob_, 2);  // within nlp's guarantee: reclaims
  auto pass = cluster_->schedulePass();
  EXPECT_TRUE(job(id).evicting);
  EXPECT_TRUE(pass.pushHosts.count(a) && pass.pushHosts.count(b));
  // Agents hear of an eviction only once it is durable.
  EXPECT_FALSE(desired(a, id).at("cancel").get<bool>());
  cluster_->passDurable(pass.value);
  EXPECT_TRUE(desired(a, id).at("cancel").get<bool>());
  EXPECT_TRUE(desired(b, id).at("cancel").get<bool>());
  EXPECT_EQ(desired(b, id).at("grace_ms"), cluster_->options().preemptGraceMs);
  cluster_->agentStatus(a, {report(id, ActualState::kExited, {}, 15)});
  EXPECT_TRUE(job(id).evicting);  // rank 1 still holds its GPUs
  cluster_->agentStatus(b, {report(id, ActualState::kExited, {}, 15)});
  j = job(id);
  EXPECT_EQ(j.state, JobState::kQueued);
  EXPECT_EQ(j.preemptions, 1);
  EXPECT_TRUE(j.ranks.empty());
  place();
  EXPECT_EQ(job(claim).state, JobState::kScheduled);
}

TEST_F(GangTest, EachRankKeepsItsOwnLog) {
  auto [id, a, b] = placedGang();
  ASSERT_TRUE(cluster_->agentLog(a, {id, 0, "rank0\n"}).ok());
  ASSERT_TRUE(cluster_->agentLog(b, {id, 0, "rank1 line\n"}).ok());
  EXPECT_EQ(*logs_->read(id, 0, 1024, 0), "rank0\n");
  EXPECT_EQ(*logs_->read(id, 0, 1024, 1), "rank1 line\n");
  // Each host resumes its own rank's log.
  EXPECT_EQ(desired(a, id).at("log_offset"), 6);
  EXPECT_EQ(desired(b, id).at("log_offset"), 11);
  EXPECT_EQ(cluster_->agentLog("gpu-c", {id, 0, "x"}).code(), Code::kNotFound);
}

TEST_F(GangTest, AGangCountsEachOfItsGpusOnceInTheUsageHistory) {
  submitGang(alice_, 2, 2);
  place();
  clock_.advance(3'600'000);
  cluster_->accountUsage();
  // Four GPUs for an hour, decayed a little while it accrued.
  const double used = cluster_->world().teams.at("vision").usageGpuSeconds;
  EXPECT_GT(used, 14'000);
  EXPECT_LT(used, 14'400);
}

TEST_F(GangTest, GangFieldsAreChecked) {
  JobRequest r;
  r.command = {"x"};
  r.resources.gpus = 1;
  r.resources.hosts = 0;
  EXPECT_EQ(cluster_->submitJob(alice_, r).status().field(), "hosts");
  r.resources.hosts = 65;
  EXPECT_EQ(cluster_->submitJob(alice_, r).status().field(), "hosts");
  r.resources.hosts = 2;
  r.resources.gpus = 0;
  EXPECT_EQ(cluster_->submitJob(alice_, r).status().field(), "hosts");
  r.resources.gpus = 1;
  r.resources.gpuMilli = 500;
  EXPECT_EQ(cluster_->submitJob(alice_, r).status().field(), "hosts");
  r.resources.gpuMilli = 1000;
  r.resources.gpus = 0;
  r.resources.wholeHost = true;
  EXPECT_EQ(cluster_->submitJob(alice_, r).status().field(), "hosts");
}

TEST_F(GangTest, RanksSurviveTheStoreAndOldJobsLoadAsSingleHost) {
  int64_t id = submitGang(alice_, 2, 2);
  place();
  cluster_->agentStatus(job(id).ranks[1].host, {report(id, ActualState::kExited, 3)});
  auto j = job(id);
  auto back = store::jobFromStoreDoc(store::toStoreDoc(j)).value();
  EXPECT_EQ(back.resources.hosts, 2);
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_EQ(back.failedRank, 1);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(back.ranks[r].host, j.ranks[r].host);
    EXPECT_EQ(back.ranks[r].gpuIndices, j.ranks[r].gpuIndices);
    EXPECT_EQ(back.ranks[r].gpuUuids, j.ranks[r].gpuUuids);
    EXPECT_EQ(back.ranks[r].state, j.ranks[r].state);
    EXPECT_EQ(back.ranks[r].exitCode, j.ranks[r].exitCode);
  }
  // A restart rebuilds the indexes from the ranks.
  World w;
  store::Contents contents;
  contents.jobs.push_back(back);
  w.load(contents);
  EXPECT_TRUE(w.hostJobsOf("gpu-a").count(id));
  EXPECT_TRUE(w.hostJobsOf("gpu-b").count(id));
  EXPECT_EQ(w.gpuHolders().at("gpu-b").size(), 2u);
  auto old = store::jobFromStoreDoc({{"id", 7}, {"host", "gpu-a"}, {"gpu_indices", {0}}}).value();
  EXPECT_EQ(old.resources.hosts, 1);
  ASSERT_EQ(old.ranks.size(), 1u) << "its flat fields are its one rank";
  EXPECT_EQ(old.ranks[0].host, "gpu-a");
  EXPECT_EQ(old.ranks[0].gpuIndices, std::vector<int>{0});
  EXPECT_EQ(model::toJson(old).count("ranks"), 0u);
  EXPECT_EQ(model::toJson(j).at("ranks").size(), 2u);
  EXPECT_EQ(model::toJson(j).at("ranks")[1].at("exit_code"), 3);
}

}  // namespace
}  // namespace allot::control
