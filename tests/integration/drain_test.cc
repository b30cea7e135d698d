// Draining a host with real processes: a running job is preempted at the drain's deadline (set
// before an allotd restart) and requeued, the host reaches maintenance, and new work stays off it
// until `allot host resume`. Plus the API's answers to bad drain requests.

#include "harness.h"

namespace allot::it {
namespace {

class DrainTest : public TestCluster {};

std::string hostAdminState(const json& h) { return textOf(h, "admin_state"); }

TEST_F(DrainTest, DeadlinePreemptsAndResumeLetsWorkBackOn) {
  startAgent("gpu-a", "sim:2xA100");
  createTeam("ml");
  std::string alice = createUser("alice", "ml");

  int64_t spot = submit(alice, {"--gpus", "1", "--preemptible"}, {"sleep", "600"});
  ASSERT_TRUE(waitForJobState(alice, spot, "running"));

  // A member may not drain; the admin may.
  CliResult refused = cliAs(alice, {"host", "drain", "gpu-a"});
  EXPECT_NE(refused.code, 0) << refused.describe();
  EXPECT_EQ(hostAdminState(host("gpu-a")), "available");

  // A deadline stops work: the CLI lists it and, with no terminal to ask on, refuses without
  // --force. Nothing changes.
  CliResult asked =
      cli({"host", "drain", "gpu-a", "--deadline", "2s", "--reason", "kernel update"});
  EXPECT_EQ(asked.code, 1) << asked.describe();
  EXPECT_NE(asked.err.find("This stops 1 running job at "), std::string::npos) << asked.err;
  EXPECT_NE(asked.err.find("j-" + std::to_string(spot) + " "), std::string::npos) << asked.err;
  EXPECT_NE(asked.err.find("(alice, team ml) on gpu-a, 1 GPUs"), std::string::npos) << asked.err;
  EXPECT_NE(asked.err.find("run again with --force"), std::string::npos) << asked.err;
  EXPECT_EQ(hostAdminState(host("gpu-a")), "available");
  EXPECT_EQ(textOf(job(alice, spot), "state"), "running");
  // The impact is the admin's to see: a member is refused; a bad deadline is named.
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/hosts/gpu-a/impact?deadline=2s", "", alice).status,
            403);
  EXPECT_EQ(
      httpRequest(port_, "GET", "/api/v1/hosts/gpu-a/impact?deadline=soon", "", adminToken_).status,
      400);

  CliResult drained =
      cli({"host", "drain", "gpu-a", "--deadline", "2s", "--reason", "kernel update", "--force"});
  ASSERT_EQ(drained.code, 0) << drained.describe();
  EXPECT_NE(drained.out.find("draining"), std::string::npos) << drained.out;
  const std::string deadline = textOf(host("gpu-a"), "drain_deadline");
  ASSERT_FALSE(deadline.empty());

  // The drain and its deadline outlive allotd.
  restartServer();
  json shown = host("gpu-a");
  EXPECT_EQ(hostAdminState(shown), "draining") << shown.dump();
  EXPECT_EQ(textOf(shown, "drain_deadline"), deadline) << shown.dump();

  // Past the deadline the job is stopped and, being preemptible, goes back to the queue.
  json last;
  ASSERT_TRUE(waitFor([&] {
    last = job(alice, spot);
    return textOf(last, "state") == "queued" && last.value("preemptions", 0) >= 1;
  })) << last.dump();
  EXPECT_EQ(textOf(last, "evicted_for"), "host drained: kernel update") << last.dump();
  ASSERT_TRUE(waitFor([&] { return hostAdminState(host("gpu-a")) == "maintenance"; }))
      << host("gpu-a").dump();

  // New work waits, and says why, rather than landing on the drained host.
  int64_t fresh = submit(alice, {"--gpus", "1"}, {"sleep", "600"});
  for (int64_t id : {spot, fresh}) {
    HttpResult explain =
        httpRequest(port_, "GET", "/api/v1/jobs/" + std::to_string(id) + "/explain", "", alice);
    ASSERT_EQ(explain.status, 200) << explain.body;
    ASSERT_TRUE(waitFor([&] {
      explain =
          httpRequest(port_, "GET", "/api/v1/jobs/" + std::to_string(id) + "/explain", "", alice);
      return textOf(explain.parsed().value("wait", json::object()), "kind") == "hosts_drained";
    })) << explain.body;
    // It names the host and its state, not "no host has such GPUs".
    EXPECT_NE(textOf(explain.parsed()["wait"], "reason").find("host gpu-a is in maintenance"),
              std::string::npos)
        << explain.body;
    EXPECT_EQ(textOf(job(alice, id), "state"), "queued");
  }

  // The record: commissioning when it joined, who drained it, and allotd finishing the drain.
  json log = cliJson(alice, {"host", "log", "gpu-a"});
  ASSERT_EQ(log.size(), 4u) << log.dump();
  EXPECT_EQ(textOf(log[0], "to"), "commissioning");
  EXPECT_EQ(textOf(log[1], "reason"), "commissioned");
  EXPECT_EQ(textOf(log[2], "by"), "admin");
  EXPECT_EQ(textOf(log[2], "to"), "draining");
  EXPECT_EQ(textOf(log[2], "reason"), "kernel update");
  EXPECT_EQ(textOf(log[3], "by"), "allotd");
  EXPECT_EQ(textOf(log[3], "to"), "maintenance");

  CliResult resumed = cli({"host", "resume", "gpu-a"});
  ASSERT_EQ(resumed.code, 0) << resumed.describe();
  for (int64_t id : {spot, fresh}) {
    EXPECT_TRUE(waitForJobState(alice, id, "running", &last)) << last.dump();
    EXPECT_EQ(textOf(last, "host"), "gpu-a");
  }
  EXPECT_EQ(cliJson(adminToken_, {"host", "log", "gpu-a"}).size(), 5u);
}

TEST_F(DrainTest, WorkThatOnlyADrainingHostCouldRunSaysItIsDrainingAndUntilWhen) {
  startAgent("gpu-a", "sim:2xA100");
  createTeam("ml");
  std::string alice = createUser("alice", "ml");
  int64_t busy = submit(alice, {"--gpus", "1"}, {"sleep", "600"});
  ASSERT_TRUE(waitForJobState(alice, busy, "running"));
  CliResult drained = cli({"host", "drain", "gpu-a", "--deadline", "1h", "--force"});
  ASSERT_EQ(drained.code, 0) << drained.describe();
  const std::string deadline = textOf(host("gpu-a"), "drain_deadline");
  ASSERT_FALSE(deadline.empty());

  // The host's other GPU is free and an A100, as asked, but the host takes no new work: the wait
  // says which host, that it drains, and when its work is stopped; not "no host has A100s".
  int64_t waiting = submit(alice, {"--gpus", "1", "--gpu-model", "A100"}, {"true"});
  HttpResult explain;
  ASSERT_TRUE(waitFor([&] {
    explain = httpRequest(port_, "GET", "/api/v1/jobs/" + std::to_string(waiting) + "/explain", "",
                          alice);
    return textOf(explain.parsed().value("wait", json::object()), "kind") == "hosts_drained";
  })) << explain.body;
  EXPECT_NE(textOf(explain.parsed()["wait"], "reason")
                .find("host gpu-a is draining (work still on it is stopped at " + deadline + ")"),
            std::string::npos)
      << explain.body;
  CliResult shown = cliAs(alice, {"job", "show", std::to_string(waiting)});
  EXPECT_NE(shown.out.find("host gpu-a is draining"), std::string::npos) << shown.describe();
}

TEST_F(DrainTest, BadDrainRequestsChangeNothing) {
  startAgent("gpu-a", "sim:1xA100");
  createTeam("ml");
  std::string alice = createUser("alice", "ml");
  auto drain = [&](const std::string& host, const std::string& body, const std::string& token) {
    return httpRequest(port_, "POST", "/api/v1/hosts/" + host + "/drain", body, token);
  };
  HttpResult bad = drain("gpu-a", R"({"deadline":"soon"})", adminToken_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("deadline"), std::string::npos) << bad.body;
  bad = drain("gpu-a", R"({"deadline":"0s"})", adminToken_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  bad = drain("gpu-a", R"({"deadline":30})", adminToken_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  bad = drain("gpu-a", R"({"until":"30m"})", adminToken_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(drain("nope", "{}", adminToken_).status, 404);
  EXPECT_EQ(drain("gpu-a", "{}", alice).status, 403);
  HttpResult state = httpRequest(port_, "POST", "/api/v1/hosts/gpu-a/admin-state",
                                 R"({"state":"maintenance"})", adminToken_);
  EXPECT_EQ(state.status, 400) << state.body;
  EXPECT_EQ(hostAdminState(host("gpu-a")), "available");
  HttpResult log = httpRequest(port_, "GET", "/api/v1/hosts/gpu-a/events", "", adminToken_);
  ASSERT_EQ(log.status, 200);
  EXPECT_EQ(log.parsed().size(), 2u) << log.body;  // commissioning only
}

}  // namespace
}  // namespace allot::it
