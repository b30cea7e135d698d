// What a Slurm user brings to `allot run` beyond a command: job arrays with a limit on how many
// run at once, a job spec file, a working directory, output since a time, and a queue that is
// watched rather than polled by hand. Through the CLI, against real allotd and agent processes.

#include <chrono>
#include <filesystem>
#include <thread>

#include "harness.h"

namespace allot::it {
namespace {

class JobSpecTest : public TestCluster {
 protected:
  void SetUp() override {
    TestCluster::SetUp();
    startAgent("node-a", "sim:4xA100");
    createTeam("ml");
    token_ = createUser("carol", "ml");
  }
  std::string token_;
};

TEST_F(JobSpecTest, AnArrayRunsEveryIndexWithNoMoreThanItsLimitAtOnce) {
  // Each task marks itself running in a shared directory, counts the marks, and holds its GPU
  // until it may go: a third task running beside two would count three.
  const std::string dir = path("array");
  std::filesystem::create_directories(dir);
  const std::string release = path("release-array");
  const std::string mark = "'" + dir + "/run.'\"$ALLOT_ARRAY_INDEX\"";
  const std::string script = "touch " + mark + "; ls '" + dir + "' | grep -c '^run' > '" + dir +
                             "/count.'\"$ALLOT_ARRAY_INDEX\"; while [ ! -e '" + release +
                             "' ]; do sleep 0.05; done; rm " + mark +
                             "; echo task $ALLOT_ARRAY_INDEX of $ALLOT_ARRAY_ID";
  auto run = cliAs(
      token_, {"run", "-o", "json", "--gpus", "1", "--array", "0-4,7%2", "--", "sh", "-c", script});
  ASSERT_EQ(run.code, 0) << run.describe();
  json first = run.parsed();
  const int64_t arrayId = first["id"].get<int64_t>();
  ASSERT_EQ(first["array_tasks"].size(), 6u) << first.dump();
  EXPECT_EQ(first["array"]["id"], arrayId) << first.dump();
  EXPECT_EQ(first["array"]["limit"], 2) << first.dump();
  std::vector<int64_t> tasks;
  for (const auto& t : first["array_tasks"]) tasks.push_back(t.get<int64_t>());

  // Four GPUs free, but two run: the others say the array's limit holds them.
  auto running = [&] {
    int n = 0;
    for (int64_t id : tasks) n += textOf(job(token_, id), "state") == "running";
    return n;
  };
  ASSERT_TRUE(waitFor([&] { return running() == 2; }));
  const json waiting = job(token_, tasks.back());
  EXPECT_EQ(textOf(waiting, "state"), "queued") << waiting.dump();
  EXPECT_NE(textOf(waiting, "reason").find("array"), std::string::npos) << waiting.dump();
  json explained = cliJson(token_, {"job", "explain", std::to_string(tasks.back())});
  EXPECT_EQ(textOf(explained["wait"], "kind"), "array_limit") << explained.dump();

  writeFile(release, "");
  const std::vector<int> indices = {0, 1, 2, 3, 4, 7};
  for (size_t i = 0; i < tasks.size(); ++i) {
    json last;
    ASSERT_TRUE(waitForJobState(token_, tasks[i], "succeeded", &last)) << last.dump();
    EXPECT_EQ(last["array"]["index"], indices[i]) << last.dump();
    EXPECT_EQ(logs(token_, tasks[i]),
              "task " + std::to_string(indices[i]) + " of " + std::to_string(arrayId) + "\n");
    EXPECT_LE(std::stoi(trim(readFile(dir + "/count." + std::to_string(indices[i])))), 2)
        << "task " << indices[i] << " ran beside two others";
  }

  // Bad specs are refused whole, naming the flag; nothing is submitted.
  const size_t before = cliJson(token_, {"job", "list"}).size();
  for (const char* bad : {"5-1", "0-100000", "1,x", "0-3%0", "0-2000"}) {
    auto r = cliAs(token_, {"run", "--array", bad, "--", "true"});
    EXPECT_NE(r.code, 0) << bad << ": " << r.describe();
    EXPECT_NE(r.err.find("array"), std::string::npos) << bad << ": " << r.err;
  }
  EXPECT_EQ(cliAs(token_, {"run", "--wait", "--array", "0-1", "--", "true"}).code, 2);
  EXPECT_EQ(cliJson(token_, {"job", "list"}).size(), before);
}

TEST_F(JobSpecTest, AJobSpecFileCarriesTheFlagsFieldsAndTheCommandLineWins) {
  const std::string spec = path("train.yaml");
  writeFile(spec,
            "# as sbatch's #SBATCH lines, in one place\n"
            "name: train-resnet\n"
            "gpus: 2\n"
            "gpu_model: [A100]\n"
            "max-runtime: 1h\n"
            "env:\n"
            "  EPOCHS: \"3\"\n"
            "workdir: " +
                root_ +
                "\n"
                "command: |\n"
                "  echo \"$EPOCHS epochs in $(pwd) on GPUs $CUDA_VISIBLE_DEVICES\"\n");
  auto r = cliAs(token_, {"run", "-o", "json", "-f", spec, "--name", "override"});
  ASSERT_EQ(r.code, 0) << r.describe();
  json j = r.parsed();
  const int64_t id = j["id"].get<int64_t>();
  EXPECT_EQ(j["name"], "override") << "a flag on the command line wins over the file";
  EXPECT_EQ(j["gpus"], 2) << j.dump();
  EXPECT_EQ(j["gpu_models"], json::array({"A100"})) << j.dump();
  EXPECT_EQ(j["workdir"], root_) << j.dump();
  ASSERT_TRUE(waitForJobState(token_, id, "succeeded"));
  // The GPUs it ran on, from the job as it ended: the submission's reply may come before the
  // pass that placed it.
  const json ran = job(token_, id);
  ASSERT_EQ(ran["gpu_uuids"].size(), 2u) << ran.dump();
  EXPECT_EQ(logs(token_, id), "3 epochs in " + root_ + " on GPUs " +
                                  ran["gpu_uuids"][0].get<std::string>() + "," +
                                  ran["gpu_uuids"][1].get<std::string>() + "\n");

  // A field the flags do not have, a value of the wrong shape, and text that is not YAML: one
  // line naming the file, the line and the field; nothing submitted.
  const size_t before = cliJson(token_, {"job", "list"}).size();
  struct Bad {
    std::string text, says;
  };
  for (const Bad& bad :
       {Bad{"gpus: 1\ngpu_count: 2\ncommand: [true]\n", "gpu_count"},
        Bad{"gpus: [1, 2]\ncommand: [true]\n", "gpus"}, Bad{"gpus: 1\n", "command"},
        Bad{"gpus: [1\n", "not YAML"}, Bad{"- gpus: 1\n", "map of fields"}}) {
    writeFile(spec, bad.text);
    auto refused = cliAs(token_, {"run", "-f", spec});
    EXPECT_EQ(refused.code, 2) << refused.describe();
    if (bad.says != "command") {
      EXPECT_NE(refused.err.find(spec), std::string::npos) << refused.err;
    }
    EXPECT_NE(refused.err.find(bad.says), std::string::npos) << refused.err;
  }
  auto missing = cliAs(token_, {"run", "-f", path("nowhere.yaml")});
  EXPECT_NE(missing.code, 0) << missing.describe();
  EXPECT_EQ(cliJson(token_, {"job", "list"}).size(), before);
}

TEST_F(JobSpecTest, AJobStartsInItsWorkdirOrFailsSayingItCannotEnterIt) {
  const std::string code = path("code");
  std::filesystem::create_directories(code);
  writeFile(code + "/train.sh", "echo training in $(pwd)\n");
  const std::string out = runToEnd(token_, "sh train.sh", {"--workdir", code});
  EXPECT_EQ(out, "training in " + code + "\nend-of-probe\n");

  // A directory that is not there: the job fails to start, saying which and why.
  int64_t id = submit(token_, {"--workdir", path("gone")}, {"true"});
  json last;
  ASSERT_TRUE(waitForJobState(token_, id, "failed", &last)) << last.dump();
  EXPECT_NE(textOf(last, "reason").find("cannot enter working directory " + path("gone")),
            std::string::npos)
      << last.dump();

  // Through the API a workdir must be absolute and clean; the error names the field.
  for (const char* bad : {"relative/dir", "/a/../etc", "/x\n"}) {
    auto r = httpRequest(port_, "POST", "/api/v1/jobs",
                         json({{"command", {"true"}}, {"workdir", bad}}).dump(), token_);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
    EXPECT_NE(r.body.find("workdir"), std::string::npos) << r.body;
  }
}

TEST_F(JobSpecTest, LogsSinceStartAtOutputReceivedAfterTheTimeAndCombineWithTail) {
  const std::string release = path("release-late");
  int64_t id = submit(token_, {},
                      {"sh", "-c",
                       "echo early; echo early2; while [ ! -e '" + release +
                           "' ]; do sleep 0.05; done; echo late; echo late2"});
  ASSERT_TRUE(waitFor([&] { return logs(token_, id) == "early\nearly2\n"; }));
  // The log is indexed by the second: let two go by so that the early lines are all before T.
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  char iso[32];
  std::strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  writeFile(release, "");
  ASSERT_TRUE(waitForJobState(token_, id, "succeeded"));

  auto since = cliAs(token_, {"job", "logs", std::to_string(id), "--since", iso});
  ASSERT_EQ(since.code, 0) << since.describe();
  EXPECT_EQ(since.out, "late\nlate2\n");
  auto both = cliAs(token_, {"job", "logs", std::to_string(id), "--since", iso, "--tail", "1"});
  EXPECT_EQ(both.out, "late2\n") << both.describe();
  auto wide = cliAs(token_, {"job", "logs", std::to_string(id), "--since", "-1h", "--tail", "3"});
  EXPECT_EQ(wide.out, "early2\nlate\nlate2\n") << wide.describe();
  EXPECT_EQ(cliAs(token_, {"job", "logs", std::to_string(id), "--since", "-1h"}).out,
            "early\nearly2\nlate\nlate2\n");

  auto bad = cliAs(token_, {"job", "logs", std::to_string(id), "--since", "yesterdayish"});
  EXPECT_EQ(bad.code, 2) << bad.describe();
  EXPECT_NE(bad.err.find("--since"), std::string::npos) << bad.err;
  auto api = httpRequest(port_, "GET", "/api/v1/jobs/" + std::to_string(id) + "/logs?since=soon",
                         "", token_);
  EXPECT_EQ(api.status, 400) << api.body;
  EXPECT_NE(api.body.find("since"), std::string::npos) << api.body;
}

TEST_F(JobSpecTest, JobListWatchPrintsTheQueueAgainWhenItChanges) {
  const std::string release = path("release-watch");
  auto watcher = spawnCliAs(
      token_,
      {"job", "list", "--mine", "--state", "queued,running", "--watch", "--interval", "200ms"},
      "watch");
  ASSERT_TRUE(waitFor([&] { return watcher->stdoutText().find("--- ") != std::string::npos; }))
      << watcher->stderrText();
  int64_t id = submit(token_, {"--name", "watched"},
                      {"sh", "-c", "while [ ! -e '" + release + "' ]; do sleep 0.05; done"});
  ASSERT_TRUE(waitFor([&] {
    const std::string text = watcher->stdoutText();
    return text.find("watched") != std::string::npos && text.find("running") != std::string::npos;
  })) << watcher->stdoutText();
  writeFile(release, "");
  ASSERT_TRUE(waitForJobState(token_, id, "succeeded"));
  // The ended job leaves the listing of queued and running work: the last listing is empty.
  ASSERT_TRUE(waitFor([&] {
    const std::string text = watcher->stdoutText();
    const size_t last = text.rfind("--- ");
    return last != std::string::npos && text.find("watched", last) == std::string::npos &&
           text.find("ID", last) != std::string::npos;
  })) << watcher->stdoutText();
  EXPECT_TRUE(watcher->running()) << "--watch runs until interrupted";
  watcher->signal(SIGINT);
  EXPECT_TRUE(watcher->waitFor(std::chrono::seconds(10)).has_value());

  auto bad = cliAs(token_, {"job", "list", "--watch", "--interval", "1ms"});
  EXPECT_EQ(bad.code, 2) << bad.describe();
  EXPECT_NE(bad.err.find("--interval"), std::string::npos) << bad.err;
}

TEST_F(JobSpecTest, AQueuedJobBehindWorkThatDeclaredItsEndSaysWhenItIsExpectedToStart) {
  // All four GPUs for an hour at most; the next job waits for them.
  int64_t ahead = submit(token_, {"--gpus", "4", "--max-runtime", "1h"}, {"sleep", "600"});
  ASSERT_TRUE(waitForJobState(token_, ahead, "running"));
  int64_t behind = submit(token_, {"--gpus", "2"}, {"true"});
  json j;
  ASSERT_TRUE(waitFor([&] {
    j = job(token_, behind);
    return j["expected_start"].is_string();
  })) << j.dump();
  auto shown = cliAs(token_, {"job", "show", std::to_string(behind)});
  EXPECT_NE(shown.out.find("expected start:"), std::string::npos) << shown.out;
  EXPECT_TRUE(shown.out.find("(in 59m") != std::string::npos ||
              shown.out.find("(in 1h") != std::string::npos)
      << shown.out;
  cliAs(token_, {"job", "cancel", std::to_string(behind)});
  cliAs(token_, {"job", "cancel", std::to_string(ahead)});
  ASSERT_TRUE(waitForJobState(token_, ahead, "cancelled"));

  // Behind work with no declared end there is no time to give.
  int64_t open = submit(token_, {"--gpus", "4"}, {"sleep", "600"});
  ASSERT_TRUE(waitForJobState(token_, open, "running"));
  int64_t after = submit(token_, {"--gpus", "1"}, {"true"});
  ASSERT_TRUE(waitFor([&] { return job(token_, after).contains("position"); }));
  EXPECT_TRUE(job(token_, after)["expected_start"].is_null()) << job(token_, after).dump();
  EXPECT_NE(cliAs(token_, {"job", "show", std::to_string(after)}).out.find("expected start:"),
            std::string::npos);
  cliAs(token_, {"job", "cancel", std::to_string(after)});
  cliAs(token_, {"job", "cancel", std::to_string(open)});
}

}  // namespace
}  // namespace allot::it
