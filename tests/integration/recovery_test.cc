// Crashes: allotd or an agent killed with SIGKILL, then restarted (or not).

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "harness.h"

namespace allot::it {
namespace {

// Prints "start", waits for `first`, prints "middle", waits for `second`, then prints 1..2000.
std::vector<std::string> twoStageJob(const std::string& first, const std::string& second) {
  return {"sh", "-c",
          "echo start; while [ ! -e '" + first + "' ]; do sleep 0.1; done; echo middle; " +
              "while [ ! -e '" + second + "' ]; do sleep 0.1; done; seq 1 2000"};
}

std::string twoStageOutput() {
  std::string out = "start\nmiddle\n";
  for (int i = 1; i <= 2000; ++i) out += std::to_string(i) + "\n";
  return out;
}

class RecoveryTest : public TestCluster {
 protected:
  // Starts twoStageJob as `token` on `gpus` GPUs and waits until it runs and has printed "start".
  int64_t startTwoStageJob(const std::string& token, const std::string& gpus,
                           json* running = nullptr) {
    int64_t id = submit(token, {"--gpus", gpus}, twoStageJob(firstFile(), secondFile()));
    json last;
    if (!waitForJobState(token, id, "running", &last))
      throw std::runtime_error("the job never ran: " + last.dump());
    if (running) *running = last;
    if (!waitFor([&] { return logs(token, id) == "start\n"; }))
      throw std::runtime_error("the job never printed 'start'");
    return id;
  }
  // Once firstFile() is there (written across the crash): the job prints "middle" and, given
  // secondFile(), ends well with all of its output. `crash` names the crash for messages.
  void expectTwoStageJobFinishes(const std::string& token, int64_t id, const std::string& crash) {
    std::string got;
    EXPECT_TRUE(waitFor([&] { return (got = logs(token, id)) == "start\nmiddle\n"; }))
        << "logs after " << crash << ": '" << got << "'";

    writeFile(secondFile(), "");
    json j;
    ASSERT_TRUE(waitForJobState(token, id, "succeeded", &j));
    EXPECT_EQ(j["exit_code"], 0) << j.dump();
    EXPECT_TRUE(logs(token, id) == twoStageOutput()) << "output incomplete after " << crash;
  }

  // The files twoStageJob waits for, in this test's temp dir (known once SetUp has made it).
  std::string firstFile() const { return path("first"); }
  std::string secondFile() const { return path("second"); }
};

// allotd with a short lost-after, so that an agent that stays away loses its jobs quickly.
class LostAfterTest : public TestCluster {
 protected:
  std::vector<std::string> serverFlags() const override {
    return {"--heartbeat", "1s", "--lost-after", "3s"};
  }
};

std::vector<std::string> sorted(const json& arr) {
  std::vector<std::string> out;
  for (const auto& v : arr) out.push_back(v.dump());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(RecoveryTest, ServerKill9KeepsAcknowledgedJobsAndRunningWork) {
  startAgent("gpu-a", "sim:4xA100");
  createTeam("ml");
  std::string erin = createUser("erin", "ml");
  int64_t longJob = startTwoStageJob(erin, "1");

  // Submissions keep coming while allotd dies; a 201 means the job must survive. They ask for
  // 8 GPUs, which no host has, so they stay queued and cost nothing.
  std::mutex mu;
  std::vector<int64_t> acked;
  std::string submitError;
  std::atomic<bool> stop{false}, finished{false};
  const uint16_t port = port_;
  std::thread submitter([&] {
    for (int i = 0; i < 1000 && !stop; ++i) {
      std::string body = R"({"command":["true"],"gpus":8,"queue_anyway":true,"name":"burst-)" +
                         std::to_string(i) + R"("})";
      try {
        auto r = httpRequest(port, "POST", "/api/v1/jobs", body, erin);
        std::lock_guard lock(mu);
        if (r.status != 201) {
          submitError = "HTTP " + std::to_string(r.status) + ": " + r.body;
          break;
        }
        acked.push_back(r.parsed().at("id").get<int64_t>());
      } catch (const std::exception&) {
        break;  // allotd died with this request in flight: not acknowledged
      }
    }
    finished = true;
  });
  bool enough = waitFor([&] {
    std::lock_guard lock(mu);
    return acked.size() >= 50 || finished;
  });
  killServer();
  stop = true;
  submitter.join();
  ASSERT_TRUE(enough && submitError.empty() && acked.size() >= 50)
      << acked.size() << " acknowledged; " << submitError;
  RecordProperty("acknowledged_before_kill", static_cast<int>(acked.size()));

  // Output the job writes while allotd is down must not be lost.
  writeFile(firstFile(), "");
  startServer();

  std::map<int64_t, json> listed;
  for (const auto& j : cliJson(erin, {"job", "list", "--limit", "10000"})) {
    listed[j.at("id").get<int64_t>()] = j;
  }
  std::set<int64_t> unique(acked.begin(), acked.end());
  EXPECT_EQ(unique.size(), acked.size()) << "allotd acknowledged the same id twice";
  for (int64_t id : acked) {
    auto it = listed.find(id);
    if (it == listed.end()) {
      ADD_FAILURE() << "acknowledged job " << id << " is gone after the restart";
      continue;
    }
    EXPECT_EQ(it->second["state"], "queued") << it->second.dump();
    EXPECT_EQ(it->second["command"], json::array({"true"})) << it->second.dump();
    EXPECT_EQ(it->second["gpus"], 8) << it->second.dump();
  }
  // No acknowledged id is handed out again.
  int64_t after = submit(erin, {"--gpus", "8", "--queue-anyway"}, {"true"});
  EXPECT_GT(after, *std::max_element(acked.begin(), acked.end()));

  // The agent comes back by itself; its job never stopped running.
  ASSERT_TRUE(waitForHostState("gpu-a", "online"));
  json j = job(erin, longJob);
  EXPECT_EQ(j["state"], "running") << j.dump();
  EXPECT_EQ(j["host"], "gpu-a") << j.dump();
  expectTwoStageJobFinishes(erin, longJob, "the restart");
}

TEST_F(RecoveryTest, AgentKill9RunningJobIsReadopted) {
  startAgent("gpu-a", "sim:4xA100");
  createTeam("ml");
  std::string fred = createUser("fred", "ml");
  json before;
  int64_t id = startTwoStageJob(fred, "2", &before);

  killAgent("gpu-a");
  ASSERT_TRUE(waitForHostState("gpu-a", "unreachable"));
  // Its job is not given up on while the host may come back.
  json j = job(fred, id);
  EXPECT_EQ(j["state"], "running") << j.dump();
  writeFile(firstFile(), "");  // the job goes on writing output with no agent watching

  restartAgent("gpu-a");  // same work dir, no join token
  ASSERT_TRUE(waitForHostState("gpu-a", "online"));
  j = job(fred, id);
  EXPECT_EQ(j["state"], "running") << j.dump();
  EXPECT_EQ(j["gpu_uuids"], before["gpu_uuids"]) << j.dump();
  ASSERT_NO_FATAL_FAILURE(expectTwoStageJobFinishes(fred, id, "the agent restart"));
  EXPECT_TRUE(waitFor([&] { return host("gpu-a").at("allocations").empty(); }))
      << host("gpu-a").dump();
}

// Agents keeping their job records on a state dir of their own (--state-dir, tmpfs in the
// systemd unit): a job outlives the agent's kill -9 all the same.
class StateDirRecoveryTest : public RecoveryTest {
 protected:
  std::vector<std::string> agentFlags() const override { return {"--state-dir", path("state")}; }
};

TEST_F(StateDirRecoveryTest, AgentKill9RunningJobIsReadoptedFromItsStateDir) {
  startAgent("gpu-a", "sim:4xA100");
  createTeam("ml");
  std::string fred = createUser("fred", "ml");
  int64_t id = startTwoStageJob(fred, "1");
  const std::string records = path("state/jobs/" + std::to_string(id));
  EXPECT_FALSE(readFile(records + "/spec.json").empty());
  EXPECT_FALSE(
      std::filesystem::exists(path("agents/gpu-a/jobs/" + std::to_string(id) + "/spec.json")));

  killAgent("gpu-a");
  writeFile(firstFile(), "");
  restartAgent("gpu-a");
  ASSERT_TRUE(waitForHostState("gpu-a", "online"));
  EXPECT_EQ(job(fred, id)["state"], "running");
  ASSERT_NO_FATAL_FAILURE(expectTwoStageJobFinishes(fred, id, "the agent restart"));
  EXPECT_TRUE(waitFor([&] { return !std::filesystem::exists(records); }));
}

TEST_F(RecoveryTest, AnAgentRefusesAStateDirWhereWorkloadsWrite) {
  auto agent = Process::spawn({binPath("allot-agent"), "--server", "http://127.0.0.1:9", "--gpus",
                               "sim:1xA100", "--work-dir", path("agent"), "--scratch-dir",
                               path("scratch"), "--state-dir", path("scratch/records")},
                              path("refused.out"), path("refused.err"), childEnv({}));
  auto code = agent->waitFor(kTimeout);
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  EXPECT_NE(agent->stderrText().find("--state-dir"), std::string::npos) << agent->stderrText();
  EXPECT_FALSE(std::filesystem::exists(path("scratch/records")));

  // A symlink planted where the state dir goes (a world-writable /dev/shm, say) is refused,
  // and what it points at is not chmodded.
  std::filesystem::create_directories(path("elsewhere"));
  std::filesystem::permissions(path("elsewhere"), std::filesystem::perms(0755));
  std::filesystem::create_directory_symlink(path("elsewhere"), path("planted"));
  auto planted =
      Process::spawn({binPath("allot-agent"), "--server", "http://127.0.0.1:9", "--gpus",
                      "sim:1xA100", "--work-dir", path("agent"), "--state-dir", path("planted")},
                     path("planted.out"), path("planted.err"), childEnv({}));
  auto plantedCode = planted->waitFor(kTimeout);
  ASSERT_TRUE(plantedCode.has_value());
  EXPECT_NE(*plantedCode, 0);
  EXPECT_NE(planted->stderrText().find("--state-dir"), std::string::npos) << planted->stderrText();
  EXPECT_EQ(std::filesystem::status(path("elsewhere")).permissions(), std::filesystem::perms(0755));
}

TEST_F(LostAfterTest, JobOfAnAgentThatStaysAwayIsLostAndItsGpusFreed) {
  startAgent("gpu-a", "sim:4xA100");
  createTeam("ml");
  std::string gina = createUser("gina", "ml");
  std::string pidFile = path("job.pid");
  int64_t id = submit(gina, {"--gpus", "4"},
                      {"sh", "-c",
                       // It lingers a second after SIGTERM, as real training jobs do.
                       "trap 'sleep 1; exit 0' TERM; echo $$ > '" + pidFile + ".tmp'; mv '" +
                           pidFile + ".tmp' '" + pidFile + "'; while true; do sleep 0.1; done"});
  json running;
  ASSERT_TRUE(waitForJobState(gina, id, "running", &running));
  pid_t pid = 0;
  ASSERT_TRUE(waitFor([&] {
    std::string t = trim(readFile(pidFile));
    pid = t.empty() ? 0 : static_cast<pid_t>(std::stol(t));
    return pid > 0;
  }));

  killAgent("gpu-a");
  json lost;
  ASSERT_TRUE(waitForJobState(gina, id, "lost", &lost));
  EXPECT_FALSE(textOf(lost, "reason").empty()) << lost.dump();
  json h = host("gpu-a");
  EXPECT_EQ(h["state"], "unreachable") << h.dump();
  EXPECT_TRUE(h.at("allocations").empty()) << "a lost job still holds GPUs: " << h.dump();

  // The freed GPUs go to the next job once the host is back; the lost job's processes, which
  // outlived the agent, are stopped rather than left on those GPUs.
  // The next job must not start while the lost one still runs on the same GPUs.
  std::string p = std::to_string(pid);
  int64_t next = submit(gina, {"--gpus", "4"},
                        {"sh", "-c",
                         "if [ -e /proc/" + p + " ] && ! grep -q '^State:.*Z' /proc/" + p +
                             "/status; then echo OVERLAP; fi; echo \"$CUDA_VISIBLE_DEVICES\""});
  restartAgent("gpu-a");
  json done;
  ASSERT_TRUE(waitForJobState(gina, next, "succeeded", &done));
  EXPECT_EQ(sorted(done["gpu_uuids"]), sorted(running["gpu_uuids"])) << done.dump();
  EXPECT_EQ(logs(gina, next).find("OVERLAP"), std::string::npos)
      << "a new job started on GPUs a lost job still held";
  EXPECT_TRUE(waitFor([&] { return processGone(pid); }))
      << "the lost job (pid " << pid << ") still runs after its agent came back";
  EXPECT_EQ(job(gina, id)["state"], "lost");
}

TEST_F(RecoveryTest, WritesAcknowledgedJustBeforeKill9Survive) {
  createTeam("durable");
  std::string token = createUser("hank", "durable");
  restartServer();  // kill -9 right after the replies

  bool found = false;
  for (const auto& t : cliJson(adminToken_, {"team", "list"}))
    found |= textOf(t, "name") == "durable";
  EXPECT_TRUE(found) << "team 'durable' is gone after kill -9";
  json me = cliJson(token, {"whoami"});
  EXPECT_EQ(me["name"], "hank") << me.dump();
  EXPECT_EQ(me["team"], "durable") << me.dump();
}

}  // namespace
}  // namespace allot::it
