// Quotas through allotd and real agents: a team borrows idle guaranteed capacity, and gives it
// back when the team it belongs to asks: the borrowed job is preempted (SIGTERM, then SIGKILL
// after the grace), requeued when it is preemptible and ended as `preempted` otherwise.

#include <algorithm>

#include "harness.h"

namespace allot::it {
namespace {

class QuotaTest : public TestCluster {
 protected:
  std::vector<std::string> serverFlags() const override {
    return {"--heartbeat", "1s", "--preempt-grace", "2s"};
  }

  // POST /api/v1/jobs with the fields given; returns the job id.
  int64_t submitJson(const std::string& token, json body) {
    auto r = httpRequest(port_, "POST", "/api/v1/jobs", body.dump(), token);
    if (r.status != 201)
      throw std::runtime_error("submit: " + std::to_string(r.status) + " " + r.body);
    return r.parsed().at("id").get<int64_t>();
  }
  json explain(const std::string& token, int64_t id) {
    auto r =
        httpRequest(port_, "GET", "/api/v1/jobs/" + std::to_string(id) + "/explain", "", token);
    if (r.status != 200)
      throw std::runtime_error("explain: " + std::to_string(r.status) + " " + r.body);
    return r.parsed();
  }
};

// Holds its GPUs until killed; on SIGTERM says so and leaves, as a well-behaved job does.
std::vector<std::string> holdUntilTerm() {
  return {"sh", "-c", "trap 'echo got SIGTERM; exit 143' TERM; while true; do sleep 0.1; done"};
}

TEST_F(QuotaTest, BorrowedJobsArePreemptedWhenTheLenderAsks) {
  startAgent("gpu-a", "sim:4xA100");
  const auto [alice, carol] = createTwoTeams("ml", "alice", "cv", "carol");
  // ml is guaranteed the whole host; cv has no guarantee and borrows what ml leaves idle.
  auto q = httpRequest(port_, "PUT", "/api/v1/teams/ml/quota", R"({"guaranteed":{"any":4}})",
                       adminToken_);
  ASSERT_EQ(q.status, 200) << q.body;

  int64_t steady = submitJson(carol, {{"command", holdUntilTerm()}, {"gpus", 2}});
  ASSERT_TRUE(waitForJobState(carol, steady, "running"));
  int64_t flexible =
      submitJson(carol, {{"command", holdUntilTerm()}, {"gpus", 2}, {"preemptible", true}});
  json last;
  ASSERT_TRUE(waitForJobState(carol, flexible, "running", &last)) << last.dump();
  json placed = explain(carol, flexible);
  EXPECT_EQ(placed["placement"]["by"], "quota") << placed.dump();
  EXPECT_EQ(placed["placement"]["borrowed_gpus"], 2.0) << placed.dump();
  auto shown = cliAs(carol, {"job", "explain", std::to_string(flexible)});
  ASSERT_EQ(shown.code, 0) << shown.describe();
  EXPECT_NE(shown.out.find("placed by:"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("borrowed:"), std::string::npos) << shown.out;

  // ml asks for 2 of its 4: the most recent borrowed job goes, and comes back to the queue.
  int64_t mine = submitJson(alice, {{"command", {"sleep", "30"}}, {"gpus", 2}});
  ASSERT_TRUE(waitForJobState(alice, mine, "running", &last)) << last.dump();
  ASSERT_TRUE(waitFor([&] { return textOf(job(carol, flexible), "state") == "queued"; }));
  json requeued = job(carol, flexible);
  EXPECT_EQ(requeued["preemptions"], 1) << requeued.dump();
  EXPECT_EQ(textOf(requeued, "evicted_for"), "reclaimed by team ml for job " + std::to_string(mine))
      << requeued.dump();
  EXPECT_TRUE(requeued["finished_at"].is_null()) << requeued.dump();
  EXPECT_NE(logs(carol, flexible).find("got SIGTERM"), std::string::npos);
  EXPECT_EQ(textOf(job(carol, steady), "state"), "running");
  // While ml holds its guarantee and cv's other job holds the rest, the requeued job waits.
  json why = explain(carol, flexible);
  EXPECT_EQ(why["state"], "queued") << why.dump();
  EXPECT_TRUE(why["wait"].contains("kind")) << why.dump();
  shown = cliAs(carol, {"job", "explain", std::to_string(flexible)});
  EXPECT_NE(shown.out.find("waits because:"), std::string::npos) << shown.out;

  // ml asks for the rest: cv's other job is not preemptible, so it ends as preempted.
  int64_t more = submitJson(alice, {{"command", {"sleep", "30"}}, {"gpus", 2}});
  ASSERT_TRUE(waitForJobState(carol, steady, "preempted", &last)) << last.dump();
  EXPECT_NE(textOf(last, "reason").find("reclaimed by team ml"), std::string::npos) << last.dump();
  ASSERT_TRUE(waitForJobState(alice, more, "running", &last)) << last.dump();
  json quota = explain(alice, more)["team_quota"];
  EXPECT_EQ(quota["within_guarantee_gpus"], 4.0) << quota.dump();
  EXPECT_EQ(quota["borrowed_gpus"], 0.0) << quota.dump();
  // Another team's job does not exist for carol.
  EXPECT_EQ(
      httpRequest(port_, "GET", "/api/v1/jobs/" + std::to_string(more) + "/explain", "", carol)
          .status,
      404);
}

}  // namespace
}  // namespace allot::it

namespace allot::it {
namespace {

TEST_F(QuotaTest, GuaranteesBeyondThePoolAreRefusedOrOvercommittedAndShownScaled) {
  startAgent("gpu-a", "sim:4xA100");
  const auto [alice, carol] = createTwoTeams("ml", "alice", "cv", "carol");
  ASSERT_EQ(cli({"team", "quota", "set", "cv", "--any", "2"}).code, 0);

  // 20 on a 4-GPU pool: refused, saying what the pool has and the most ml can have.
  auto refused = cli({"team", "quota", "set", "ml", "--any", "20"});
  EXPECT_EQ(refused.code, 1) << refused.describe();
  EXPECT_NE(refused.err.find("the pool has 4 GPUs (4 A100) and other teams are guaranteed 2; "
                             "team 'ml' can be guaranteed at most 2 in all, not 20"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("--overcommit"), std::string::npos) << refused.err;
  EXPECT_NE(cli({"team", "quota", "show", "ml"}).out.find("guaranteed:     0 GPUs"),
            std::string::npos)
      << "a refusal changes nothing";

  // Accepted when asked for: the scheduler scales every guarantee down, and says so.
  ASSERT_EQ(cli({"team", "quota", "set", "ml", "--any", "6", "--overcommit"}).code, 0);
  int64_t id = submitJson(alice, {{"command", {"sleep", "30"}}, {"gpus", 1}});
  ASSERT_TRUE(waitForJobState(alice, id, "running"));
  std::string shown;
  ASSERT_TRUE(waitFor([&] {
    shown = cliAs(alice, {"team", "quota", "show", "ml"}).out;
    return shown.find("(now 3 GPUs: the teams' guarantees add up to more than the pool") !=
           std::string::npos;
  })) << shown;
  EXPECT_NE(shown.find("borrow limit:   unlimited"), std::string::npos) << shown;
  EXPECT_NE(shown.find("fair share:     "), std::string::npos) << shown;
  auto why = cliAs(alice, {"job", "explain", std::to_string(id)});
  EXPECT_NE(why.out.find("guaranteed 3 of the 6 set (scaled down"), std::string::npos) << why.out;
  json quota = explain(alice, id)["team_quota"];
  EXPECT_EQ(quota["configured_guarantee_gpus"], 6) << quota.dump();
}

TEST_F(QuotaTest, AProjectSplitOfTheWrongKindSuggestsTheFormThatFits) {
  startAgent("gpu-h", "sim:4xH100");
  createTeam("ml");
  const std::string lead = createUser("lead", "ml", "team-admin");
  ASSERT_EQ(cli({"team", "quota", "set", "ml", "--gpus", "H100=4"}).code, 0);
  ASSERT_EQ(cliAs(lead, {"project", "create", "vision", "--team", "ml"}).code, 0);

  // The team is guaranteed H100s only: a split of "any model" GPUs has nothing to come from.
  auto refused = cliAs(lead, {"project", "quota", "set", "vision", "--team", "ml", "--any", "2"});
  EXPECT_EQ(refused.code, 1) << refused.describe();
  EXPECT_NE(refused.err.find("allot project quota set PROJECT --gpus H100=2"), std::string::npos)
      << refused.err;
  EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
  auto fits =
      cliAs(lead, {"project", "quota", "set", "vision", "--team", "ml", "--gpus", "H100=2"});
  EXPECT_EQ(fits.code, 0) << fits.describe();
}

class DedicationTest : public TestCluster {};

// "Only us": a host dedicated to ml is not there for cv, in listings or in placement; ml's work
// goes there first.
TEST_F(DedicationTest, ADedicatedHostIsInvisibleAndUnusableForOtherTeams) {
  startAgent("ours", "sim:2xA100");
  startAgent("pool", "sim:2xA100");
  const auto [alice, carol] = createTwoTeams("ml", "alice", "cv", "carol");
  auto d = cli({"host", "dedicate", "ours", "--team", "ml"});
  ASSERT_EQ(d.code, 0) << d.describe();

  auto hosts = cliJson(carol, {"host", "list"});
  ASSERT_EQ(hosts.size(), 1u) << hosts.dump();
  EXPECT_EQ(hosts[0]["name"], "pool");
  auto shown = cliAs(carol, {"host", "show", "ours"});
  EXPECT_NE(shown.code, 0);
  EXPECT_NE(shown.err.find("no host 'ours'"), std::string::npos) << shown.describe();

  // cv asks for more than the pool has: it waits, told only about the hosts it may use.
  int64_t big = submit(carol, {"--gpus", "2"}, {"sleep", "30"});
  int64_t more = submit(carol, {"--gpus", "2"}, {"sleep", "30"});
  ASSERT_TRUE(waitForJobState(carol, big, "running"));
  json waiting;
  ASSERT_TRUE(waitFor([&] {
    waiting = job(carol, more);
    return textOf(waiting, "reason").find("first in line on pool") != std::string::npos;
  })) << waiting.dump();
  EXPECT_EQ(textOf(waiting, "state"), "queued");

  int64_t mine = submit(alice, {"--gpus", "2"}, {"sleep", "30"});
  json placed;
  ASSERT_TRUE(waitForJobState(alice, mine, "running", &placed)) << placed.dump();
  EXPECT_EQ(textOf(placed, "host"), "ours");
  auto why = cliJson(alice, {"job", "explain", std::to_string(mine)});
  EXPECT_EQ(why["placement"]["by"], "dedicated") << why.dump();

  // Prometheus sees who holds what (admins only: the labels name every team and host).
  auto metrics = httpRequest(port_, "GET", "/metrics", "", adminToken_);
  ASSERT_EQ(metrics.status, 200) << metrics.body;
  EXPECT_NE(metrics.body.find("allot_gpu_allocated{host=\"ours\""), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("team=\"ml\",project=\"\",user=\"alice\",job=\"" +
                              std::to_string(mine) + "\"} 1"),
            std::string::npos)
      << metrics.body;
  EXPECT_EQ(httpRequest(port_, "GET", "/metrics", "", carol).status, 403);
  EXPECT_EQ(httpRequest(port_, "GET", "/metrics").status, 401);
}

}  // namespace
}  // namespace allot::it
