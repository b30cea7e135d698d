// A multi-host (gang) job through the real binaries: one process per host, started together with
// the rendezvous variables set, each rank's output kept apart.

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
  const int64_t id = runGangUntil("succeeded", "2", "echo $RANK $WORLD_SIZE $MASTER_ADDR");
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
  // MASTER_ADDR is rank 0's host, in both ranks' output.
  EXPECT_EQ(logs(token_, id), "0 2 " + host0 + "\n");
  auto rank1 = cliAs(token_, {"job", "logs", std::to_string(id), "--rank", "1"});
  ASSERT_EQ(rank1.code, 0) << rank1.describe();
  EXPECT_EQ(rank1.out, "1 2 " + host0 + "\n");

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

}  // namespace
}  // namespace allot::it
