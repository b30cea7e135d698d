// A multi-host (gang) job through the real binaries: one process per host, started together with
// the rendezvous variables set, each rank's output kept apart.

#include <stdlib.h>

#include <filesystem>

#include "harness.h"

namespace allot::it {
namespace {

class GangTest : public TestCluster {
 protected:
  void SetUp() override {
    TestCluster::SetUp();
    startAgent("node-a", "sim:2xA100");
    startAgent("node-b", "sim:2xA100");
    createTeam("ml");
    token_ = createUser("carol", "ml");
  }
  // Submits a job of two hosts with `gpus` GPUs each running `sh -c script` and waits until it
  // is `state`; its id.
  int64_t runGangUntil(const std::string& state, const std::string& gpus,
                       const std::string& script) {
    int64_t id = submit(token_, {"--hosts", "2", "--gpus", gpus}, {"sh", "-c", script});
    json last;
    if (!waitForJobState(token_, id, state, &last))
      throw std::runtime_error("the job never got " + state + ": " + last.dump());
    return id;
  }
  std::string token_;
};

TEST_F(GangTest, EachRankRunsOnItsOwnHostWithTheRendezvousAndItsOwnLog) {
  const int64_t id = runGangUntil(
      "succeeded", "2",
      "echo $RANK $WORLD_SIZE $MASTER_ADDR; echo $NODE_RANK $LOCAL_RANK $LOCAL_WORLD_SIZE "
      "$MASTER_PORT $PET_MASTER_PORT");
  json j = job(token_, id);
  EXPECT_EQ(j["hosts"], 2) << j.dump();
  ASSERT_EQ(j["ranks"].size(), 2u) << j.dump();
  const std::string host0 = j["ranks"][0]["host"], host1 = j["ranks"][1]["host"];
  EXPECT_NE(host0, host1);
  EXPECT_EQ(j["host"], host0) << j.dump();  // rank 0 in the flat fields
  for (const auto& k : j["ranks"]) {
    EXPECT_EQ(k["state"], "exited") << j.dump();
    EXPECT_EQ(k["exit_code"], 0) << j.dump();
    EXPECT_EQ(k["gpu_indices"].size(), 2u) << j.dump();
  }
  // MASTER_ADDR is the address rank 0's agent is reached at (here loopback: it reaches allotd
  // there), in both ranks' output, not a host name that need not resolve. The port is the one
  // rank 0's agent chose free on its host, the same for both; one process per host.
  const int64_t port = j["master_port"].get<int64_t>();
  EXPECT_GT(port, 0) << j.dump();
  const std::string p = std::to_string(port);
  EXPECT_EQ(logs(token_, id), "0 2 127.0.0.1\n0 0 1 " + p + " " + p + "\n");
  auto rank1 = cliAs(token_, {"job", "logs", std::to_string(id), "--rank", "1"});
  ASSERT_EQ(rank1.code, 0) << rank1.describe();
  EXPECT_EQ(rank1.out, "1 2 127.0.0.1\n1 0 1 " + p + " " + p + "\n");

  // A rank the job does not have is refused, naming the parameter.
  auto bad =
      httpRequest(port_, "GET", "/api/v1/jobs/" + std::to_string(id) + "/logs?rank=2", "", token_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("rank"), std::string::npos) << bad.body;
}

TEST_F(GangTest, ARankThatFailsStopsTheOtherAndFailsTheJobNamingIt) {
  // Rank 1 fails at once; rank 0 would run for a minute unless it is stopped.
  const int64_t id =
      runGangUntil("failed", "1", "if [ \"$RANK\" = 1 ]; then exit 3; fi; echo up; sleep 60");
  json j = job(token_, id);
  const std::string host1 = j["ranks"][1]["host"];
  EXPECT_EQ(j["reason"], "rank 1 on " + host1 + " exited with code 3") << j.dump();
  EXPECT_EQ(j["exit_code"], 3) << j.dump();
  EXPECT_EQ(j["ranks"][1]["exit_code"], 3) << j.dump();
  // Rank 0 was stopped (by a signal, or before it started), well before its minute was up.
  EXPECT_EQ(j["ranks"][0]["state"], "exited") << j.dump();
  EXPECT_NE(j["ranks"][0]["exit_code"], 0) << j.dump();
}

// A real torch.distributed program across two agents: gloo on CPU reaches rank 0's store at
// MASTER_ADDR:MASTER_PORT and all-reduces one tensor. Debian's python3-torch (scripts/
// install-deps.sh). GLOO_SOCKET_IFNAME=lo keeps gloo's own connections on loopback, where both
// agents of this test live; on a real fleet each host's interface is found from its name.
constexpr const char* kAllReduce =
    "import datetime, torch, torch.distributed as dist\n"
    "dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=60))\n"
    "t = torch.tensor([float(dist.get_rank() + 1)])\n"
    "dist.all_reduce(t)\n"
    "print(f'rank {dist.get_rank()} of {dist.get_world_size()}: sum {t.item():.0f}')\n"
    "dist.destroy_process_group()\n";

// Each rank imports torch (torchrun: twice, launcher and worker), 4 to 8 s apiece on a 2-core CI
// machine that runs other integration tests beside this one: the usual 20 s is too short.
constexpr std::chrono::seconds kTorchTimeout{120};

TEST_F(GangTest, TorchDistributedAllReducesAcrossTwoAgents) {
  writeFile(path("allreduce.py"), kAllReduce);
  const int64_t id =
      submit(token_, {"--hosts", "2", "--gpus", "1", "--env", "GLOO_SOCKET_IFNAME=lo"},
             {"python3", path("allreduce.py")});
  json last;
  ASSERT_TRUE(waitForJobState(token_, id, "succeeded", &last, kTorchTimeout)) << last.dump() << "\n"
                                                                              << logs(token_, id);
  EXPECT_EQ(logs(token_, id), "rank 0 of 2: sum 3\n");
  auto rank1 = cliAs(token_, {"job", "logs", std::to_string(id), "--rank", "1"});
  EXPECT_EQ(rank1.out, "rank 1 of 2: sum 3\n") << rank1.describe();
}

TEST_F(GangTest, TorchrunWithTwoNodesFindsItsRendezvousInTheEnvironment) {
  // torchrun reads --nnodes, --node-rank, --master-addr and --master-port from PET_* variables:
  // the job gives none of them on its command line. (--redirects 1 --tee 1 only because Debian
  // 12's torch 1.13 torchrun fails on Python 3.11 with its default of 0: Python 3.11's flag
  // enums no longer list their zero member, so "0" parses to None. Its workers' lines come back
  // prefixed "[default0]:".)
  writeFile(path("allreduce.py"), kAllReduce);
  const int64_t id =
      submit(token_, {"--hosts", "2", "--gpus", "1", "--env", "GLOO_SOCKET_IFNAME=lo"},
             {"torchrun", "--nproc_per_node", "1", "--redirects", "1", "--tee", "1",
              path("allreduce.py")});
  json last;
  ASSERT_TRUE(waitForJobState(token_, id, "succeeded", &last, kTorchTimeout)) << last.dump() << "\n"
                                                                              << logs(token_, id);
  EXPECT_NE(logs(token_, id).find("rank 0 of 2: sum 3\n"), std::string::npos) << logs(token_, id);
  auto rank1 = cliAs(token_, {"job", "logs", std::to_string(id), "--rank", "1"});
  EXPECT_NE(rank1.out.find("rank 1 of 2: sum 3\n"), std::string::npos) << rank1.describe();
}

// Agents told where their hosts are reached (`--advertise-address`): MASTER_ADDR is that address,
// not the one allotd saw them connect from. 192.0.2.10 is a documentation address nothing
// listens on; the ranks only print it.
class AdvertisedGangTest : public GangTest {
 protected:
  std::vector<std::string> agentFlags() const override {
    return {"--advertise-address", "192.0.2.10"};
  }
};

TEST_F(AdvertisedGangTest, MasterAddrIsTheAddressRankZerosAgentAdvertises) {
  const int64_t id = runGangUntil("succeeded", "1", "echo $RANK $MASTER_ADDR $PET_MASTER_ADDR");
  EXPECT_EQ(logs(token_, id), "0 192.0.2.10 192.0.2.10\n");
  auto rank1 = cliAs(token_, {"job", "logs", std::to_string(id), "--rank", "1"});
  EXPECT_EQ(rank1.out, "1 192.0.2.10 192.0.2.10\n") << rank1.describe();
}

TEST(AgentStart, AnAdvertiseAddressThatIsNoAddressIsRefused) {
  char tmpl[] = "/tmp/allot-advertise-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto agent = Process::spawn({binPath("allot-agent"), "--server", "http://127.0.0.1:9", "--gpus",
                               "sim:1xA100", "--run-as-owner", "off", "--work-dir", dir + "/agent",
                               "--advertise-address", "gpu-a; rm -rf /"},
                              dir + "/out", dir + "/err", childEnv({}));
  auto code = agent->waitFor(kTimeout);
  ASSERT_TRUE(code.has_value()) << "the agent kept running";
  EXPECT_NE(*code, 0);
  const std::string err = readFile(dir + "/err");
  EXPECT_NE(err.find("--advertise-address: 'gpu-a; rm -rf /'"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace allot::it
