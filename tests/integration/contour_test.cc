// Contours through allotd and two real agents, one in dev and one in prod: jobs run only on hosts
// of their contour, prod needs a team-admin, an unknown contour is a 400 naming the field, a job
// with no host in its contour says so, a team's per-contour limit holds, and a host's contour
// survives an allotd restart and its agent re-reporting.

#include "harness.h"

namespace allot::it {
namespace {

class ContourTest : public TestCluster {
 protected:
  json explain(const std::string& token, int64_t id) {
    auto r =
        httpRequest(port_, "GET", "/api/v1/jobs/" + std::to_string(id) + "/explain", "", token);
    if (r.status != 200)
      throw std::runtime_error("explain: " + std::to_string(r.status) + " " + r.body);
    return r.parsed();
  }
  // The wait kind of a queued job, once a scheduling pass has considered it (the submission's
  // reply does not wait for one, and until then the kind is "not_yet_considered").
  std::string waitKind(const std::string& token, int64_t id) {
    std::string kind;
    waitFor([&] {
      json why = explain(token, id);
      kind = why.contains("wait") ? textOf(why["wait"], "kind") : "";
      return !kind.empty() && kind != "not_yet_considered";
    });
    return kind;
  }
};

TEST_F(ContourTest, JobsRunOnlyInTheirContourAndProdNeedsATeamAdmin) {
  startAgent("dev-1", "sim:2xA100");
  startAgent("prod-1", "sim:2xA100");
  EXPECT_EQ(textOf(host("dev-1"), "contour"), "dev");  // new hosts: the default contour

  auto moved = cli({"host", "set-contour", "prod-1", "prod"});
  ASSERT_EQ(moved.code, 0) << moved.describe();
  EXPECT_NE(moved.out.find("contour prod"), std::string::npos) << moved.out;
  auto list = cli({"host", "list"});
  ASSERT_EQ(list.code, 0) << list.describe();
  EXPECT_NE(list.out.find("CONTOUR"), std::string::npos) << list.out;
  auto bad = cli({"host", "set-contour", "prod-1", "qa"});
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("unknown contour 'qa'"), std::string::npos) << bad.describe();

  createTeam("ml");
  std::string alice = createUser("alice", "ml");
  json made =
      cliJson(adminToken_, {"user", "create", "carol", "--team", "ml", "--role", "team-admin"});
  std::string carol = textOf(made, "token");
  ASSERT_FALSE(carol.empty()) << made.dump();

  // A member may not submit into prod; nothing is queued.
  auto refused = cliAs(alice, {"run", "--contour", "prod", "--gpus", "1", "--", "true"});
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.err.find("contour 'prod' needs role team-admin"), std::string::npos)
      << refused.describe();
  auto raw =
      httpRequest(port_, "POST", "/api/v1/jobs", R"({"command":["true"],"contour":"qa"})", alice);
  EXPECT_EQ(raw.status, 400) << raw.body;
  EXPECT_EQ(textOf(raw.parsed()["error"], "field"), "contour") << raw.body;
  EXPECT_TRUE(cliJson(alice, {"job", "list"}).empty());

  int64_t prod = submit(carol, {"--contour", "prod", "--gpus", "2"}, {"sleep", "60"});
  int64_t dev = submit(alice, {"--gpus", "2"}, {"sleep", "60"});
  json last;
  ASSERT_TRUE(waitForJobState(carol, prod, "running", &last)) << last.dump();
  EXPECT_EQ(textOf(last, "host"), "prod-1");
  EXPECT_EQ(textOf(last, "contour"), "prod");
  ASSERT_TRUE(waitForJobState(alice, dev, "running", &last)) << last.dump();
  EXPECT_EQ(textOf(last, "host"), "dev-1");
  EXPECT_EQ(textOf(last, "contour"), "dev");

  // No host is in test: refused, or with --queue-anyway, waits for its contour.
  refused = cliAs(alice, {"run", "--contour", "test", "--gpus", "1", "--", "true"});
  EXPECT_NE(refused.err.find("contour: no host of contour 'test'"), std::string::npos)
      << refused.describe();
  int64_t test = submit(alice, {"--contour", "test", "--gpus", "1", "--queue-anyway"}, {"true"});
  EXPECT_EQ(waitKind(alice, test), "no_host_in_contour");

  // At most 2 GPUs for ml in prod, and it holds 2: the next prod job waits on the limit, even
  // once prod-1 has room again.
  auto limit = cli({"team", "quota", "set", "ml", "--contour-limit", "prod=2"});
  ASSERT_EQ(limit.code, 0) << limit.describe();
  EXPECT_NE(limit.out.find("contour limits prod 2"), std::string::npos) << limit.out;
  int64_t second = submit(carol, {"--contour", "prod", "--gpus", "1"}, {"true"});
  EXPECT_EQ(waitKind(carol, second), "contour_limit");

  // allotd restarts and the agents reconnect: the contour is what the admin set.
  restartServer();
  ASSERT_TRUE(waitForHostState("prod-1", "online"));
  EXPECT_EQ(textOf(host("prod-1"), "contour"), "prod");
  EXPECT_EQ(textOf(job(carol, prod), "contour"), "prod");
}

}  // namespace
}  // namespace allot::it
