// One job's life through the CLI: its output, its exit status, its environment, its end.

#include <regex>

#include "harness.h"

namespace allot::it {
namespace {

class JobsTest : public TestCluster {
 protected:
  void SetUp() override {
    TestCluster::SetUp();
    startAgent("node-a", "sim:1xA100");
    createTeam("ml");
    token_ = createUser("carol", "ml");
  }
  std::string token_;
};

// The job id from `allot run --wait`'s "Submitted j-N; ..." line on stderr; 0 if absent.
int64_t submittedId(const CliResult& r) {
  std::smatch m;
  static const std::regex kId("Submitted j-([0-9]+)");
  if (!std::regex_search(r.err, m, kId)) return 0;
  return std::stoll(m[1].str());
}

// Reads a pid the job wrote; 0 until the file is complete.
pid_t readPid(const std::string& file) {
  std::string text = trim(readFile(file));
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return 0;
  return static_cast<pid_t>(std::stol(text));
}

TEST_F(JobsTest, RunWaitPrintsOutputAndExitsWithTheJobsStatus) {
  auto r = cliAs(token_, {"run", "--wait", "--", "sh", "-c", "echo hello; exit 7"});
  EXPECT_EQ(r.code, 7) << r.describe();
  EXPECT_EQ(r.out, "hello\n") << r.describe();
  int64_t id = submittedId(r);
  ASSERT_GT(id, 0) << r.describe();
  EXPECT_EQ(logs(token_, id), "hello\n");
  json j = job(token_, id);
  EXPECT_EQ(j["state"], "failed") << j.dump();
  EXPECT_EQ(j["exit_code"], 7) << j.dump();

  // --env reaches the job, values with spaces and '=' intact; -o json --wait prints the job.
  auto e = cliAs(token_, {"run", "--wait", "-o", "json", "--env", "GREETING=hi there=1", "--env",
                          "OTHER=x", "--", "sh", "-c", "echo \"$GREETING/$OTHER\""});
  ASSERT_EQ(e.code, 0) << e.describe();
  json done = e.parsed();
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  EXPECT_EQ(done["exit_code"], 0) << done.dump();
  EXPECT_EQ(done["env"], json({{"GREETING", "hi there=1"}, {"OTHER", "x"}})) << done.dump();
  EXPECT_NE(e.err.find("hi there=1/x\n"), std::string::npos) << e.describe();
  EXPECT_EQ(logs(token_, done["id"].get<int64_t>()), "hi there=1/x\n");

  // A job killed by signal N makes `run --wait` exit 128+N.
  auto k = cliAs(token_, {"run", "--wait", "--", "sh", "-c", "echo before; kill -9 $$"});
  EXPECT_EQ(k.code, 128 + 9) << k.describe();
  EXPECT_EQ(k.out, "before\n") << k.describe();
  int64_t killed = submittedId(k);
  ASSERT_GT(killed, 0) << k.describe();
  json kj = job(token_, killed);
  EXPECT_EQ(kj["state"], "failed") << kj.dump();
  EXPECT_EQ(kj["signal"], 9) << kj.dump();
}

TEST_F(JobsTest, LogsFollowStreamsUntilTheJobEnds) {
  std::string release = path("release");
  // Without --wait, `run` prints just the job's id ("j-N") on stdout.
  auto run = cliAs(token_, {"run", "--", "sh", "-c",
                            "echo first; while [ ! -e '" + release +
                                "' ]; do sleep 0.05; done; seq 1 500; exit 3"});
  ASSERT_EQ(run.code, 0) << run.describe();
  std::string idText = trim(run.out);
  ASSERT_EQ(idText.rfind("j-", 0), 0u) << run.describe();
  int64_t id = std::stoll(idText.substr(2));
  ASSERT_TRUE(waitFor([&] { return logs(token_, id) == "first\n"; }));
  auto follower = spawnCliAs(token_, {"job", "logs", std::to_string(id), "-f"}, "follow");
  // It prints what is there and keeps following while the job runs.
  ASSERT_TRUE(waitFor([&] { return follower->stdoutText() == "first\n"; }));
  EXPECT_TRUE(follower->running());
  writeFile(release, "");
  auto code = follower->waitFor(std::chrono::seconds(30));
  ASSERT_TRUE(code.has_value()) << "logs -f did not stop when the job ended";
  std::string want = "first\n";
  for (int i = 1; i <= 500; ++i) want += std::to_string(i) + "\n";
  EXPECT_EQ(follower->stdoutText(), want);
  EXPECT_EQ(job(token_, id)["state"], "failed");

  // --tail N prints the last N lines, as tail -n does; more than there are prints them all.
  auto tail = cliAs(token_, {"job", "logs", std::to_string(id), "--tail", "3"});
  EXPECT_EQ(tail.code, 0) << tail.describe();
  EXPECT_EQ(tail.out, "498\n499\n500\n");
  EXPECT_EQ(cliAs(token_, {"job", "logs", std::to_string(id), "-n", "0"}).out, "");
  EXPECT_EQ(cliAs(token_, {"job", "logs", std::to_string(id), "--tail", "9999"}).out, want);
  EXPECT_EQ(cliAs(token_, {"job", "logs", std::to_string(id), "--tail", "-2"}).code, 2);
}

TEST_F(JobsTest, DependenciesHoldReleaseAndRequeueAsSlurmUsersExpect) {
  // One GPU: the first job holds it until released by a file.
  std::string release = path("release-first");
  int64_t first = submit(token_, {"--gpus", "1"},
                         {"sh", "-c", "while [ ! -e '" + release + "' ]; do sleep 0.05; done"});
  ASSERT_TRUE(waitForJobState(token_, first, "running"));
  auto second = cliAs(token_, {"run", "--gpus", "1", "--dependency",
                               "afterok:" + std::to_string(first), "--", "echo", "second"});
  ASSERT_EQ(second.code, 0) << second.describe();
  const int64_t next = std::stoll(trim(second.out).substr(2));
  ASSERT_TRUE(waitFor([&] {
    return textOf(job(token_, next), "reason") ==
           "waits for job " + std::to_string(first) + " to succeed (afterok; it is running)";
  })) << job(token_, next).dump();
  // Held too: it stays queued after the first succeeds, until released.
  auto held = cliAs(token_, {"job", "hold", std::to_string(next)});
  EXPECT_EQ(held.code, 0) << held.describe();
  EXPECT_NE(held.out.find("Held j-" + std::to_string(next) + " (queued): held by carol"),
            std::string::npos)
      << held.out;
  writeFile(release, "");
  ASSERT_TRUE(waitForJobState(token_, first, "succeeded"));
  json waiting = job(token_, next);
  EXPECT_EQ(textOf(waiting, "state"), "queued") << waiting.dump();
  EXPECT_EQ(textOf(waiting, "held_by"), "carol") << waiting.dump();
  ASSERT_EQ(cliAs(token_, {"job", "release", std::to_string(next)}).code, 0);
  ASSERT_TRUE(waitForJobState(token_, next, "succeeded"));
  EXPECT_EQ(logs(token_, next), "second\n");

  // A dependency that can no longer hold cancels the job, saying why.
  int64_t doomed = submit(
      token_, {"--gpus", "1", "--dependency", "afternotok:" + std::to_string(first)}, {"true"});
  ASSERT_TRUE(waitForJobState(token_, doomed, "cancelled"));
  EXPECT_NE(textOf(job(token_, doomed), "reason").find("dependency never satisfied"),
            std::string::npos);

  // Requeue: a running job is stopped and runs again under the same id.
  int64_t again =
      submit(token_, {"--gpus", "1"},
             {"sh", "-c", "echo start; trap 'exit 143' TERM; while true; do sleep 0.05; done"});
  ASSERT_TRUE(waitFor([&] { return logs(token_, again) == "start\n"; }));
  auto requeued = cliAs(token_, {"job", "requeue", std::to_string(again)});
  EXPECT_EQ(requeued.code, 0) << requeued.describe();
  // The second run's output is appended to the first's (the log keeps both).
  auto runs = [&] {
    const std::string text = logs(token_, again);
    const size_t first = text.find("start\n");
    return first == std::string::npos                             ? 0
           : text.find("start\n", first + 1) == std::string::npos ? 1
                                                                  : 2;
  };
  ASSERT_TRUE(waitFor([&] { return runs() == 2; }))
      << logs(token_, again) << job(token_, again).dump();
  json back = job(token_, again);
  EXPECT_EQ(textOf(back, "state"), "running") << back.dump();
  EXPECT_EQ(back["preemptions"], 0) << back.dump();
  cliAs(token_, {"job", "cancel", std::to_string(again)});

  // Bad input: a one-line error, nothing submitted; another team's job is not there.
  auto bad = cliAs(token_, {"run", "--dependency", "sometime:3", "--", "true"});
  EXPECT_EQ(bad.code, 2) << bad.describe();
  EXPECT_NE(bad.err.find("unknown type 'sometime'"), std::string::npos) << bad.err;
  createTeam("cv");
  std::string dave = createUser("dave", "cv");
  auto theirs =
      cliAs(dave, {"run", "--dependency", "afterok:" + std::to_string(first), "--", "true"});
  EXPECT_NE(theirs.code, 0);
  EXPECT_NE(theirs.err.find("no job " + std::to_string(first)), std::string::npos) << theirs.err;
  EXPECT_EQ(
      httpRequest(port_, "POST", "/api/v1/jobs/" + std::to_string(again) + "/hold", "{}", dave)
          .status,
      404);
}

TEST_F(JobsTest, CancelKillsTheWholeProcessTree) {
  std::string shPid = path("sh.pid"), childPid = path("child.pid");
  int64_t id = submit(token_, {},
                      {"sh", "-c",
                       "echo $$ > '" + shPid + ".tmp'; mv '" + shPid + ".tmp' '" + shPid + "'; " +
                           "sleep 1000 & echo $! > '" + childPid + ".tmp'; mv '" + childPid +
                           ".tmp' '" + childPid + "'; sleep 1000"});
  ASSERT_TRUE(waitForJobState(token_, id, "running"));
  pid_t sh = 0, child = 0;
  ASSERT_TRUE(waitFor([&] {
    sh = readPid(shPid);
    child = readPid(childPid);
    return sh > 0 && child > 0;
  })) << "the job never wrote its pids";
  ASSERT_FALSE(processGone(sh));
  ASSERT_FALSE(processGone(child));

  json c = cliJson(token_, {"job", "cancel", std::to_string(id)});
  EXPECT_EQ(c["cancel_requested"], true) << c.dump();
  json j;
  ASSERT_TRUE(waitForJobState(token_, id, "cancelled", &j));
  EXPECT_TRUE(waitFor([&] { return processGone(sh); })) << "the job's shell " << sh << " survived";
  EXPECT_TRUE(waitFor([&] { return processGone(child); }))
      << "the job's background child " << child << " survived the cancel";

  // Cancelling again is refused: it has ended.
  auto again = cliAs(token_, {"job", "cancel", std::to_string(id)});
  EXPECT_NE(again.code, 0) << again.describe();
}

}  // namespace
}  // namespace allot::it
