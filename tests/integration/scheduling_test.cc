// Placement as users see it: which GPUs a job gets, and why a job waits.

#include <cstdio>
#include <map>
#include <set>

#include "harness.h"

namespace allot::it {
namespace {

class SchedulingTest : public TestCluster {};

// Prints the GPUs the job was given, then holds them until `release` exists.
std::vector<std::string> printGpusAndHold(const std::string& release) {
  return {"sh", "-c",
          "echo \"$CUDA_VISIBLE_DEVICES\"; while [ ! -e '" + release + "' ]; do sleep 0.1; done"};
}

std::vector<std::string> strings(const json& arr) {
  std::vector<std::string> out;
  for (const auto& v : arr) out.push_back(v.get<std::string>());
  return out;
}

TEST_F(SchedulingTest, JobsGetDisjointGpus) {
  startAgent("gpu-a", "sim:4xA100");
  startAgent("gpu-b", "sim:4xA100");
  createTeam("ml");
  std::string alice = createUser("alice", "ml");
  std::string release = path("release");

  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(submit(alice, {"--gpus", "2", "--name", "pair-" + std::to_string(i)},
                         printGpusAndHold(release)));
  }
  std::vector<json> jobs(ids.size());
  ASSERT_TRUE(waitFor([&] {
    for (size_t i = 0; i < ids.size(); ++i) {
      jobs[i] = job(alice, ids[i]);
      if (textOf(jobs[i], "state") != "running") return false;
    }
    return true;
  })) << "not all 4 jobs ran; last seen: "
      << json(jobs).dump();

  // Every (host, GPU index) held by at most one job, and each job's UUIDs are its host's GPUs.
  std::map<std::string, std::map<int, std::string>> uuidOf;  // host -> index -> uuid
  for (const char* h : {"gpu-a", "gpu-b"}) {
    json shown = host(h);
    for (const auto& g : shown.at("gpus")) uuidOf[h][g.at("index").get<int>()] = g.at("uuid");
  }
  // The agent's topology reaches the API: sim:4xA100 is one NVLink domain on two PCIe switches.
  for (const auto& g : host("gpu-a").at("gpus")) {
    EXPECT_EQ(g.at("nvlink_domain"), 0) << g.dump();
    EXPECT_EQ(g.at("pcie_switch"), g.at("index").get<int>() / 2) << g.dump();
  }
  std::map<std::pair<std::string, int>, int64_t> holder;
  for (const auto& j : jobs) {
    ASSERT_TRUE(j.at("host").is_string()) << j.dump();
    std::string h = j["host"].get<std::string>();
    ASSERT_EQ(j.at("gpu_indices").size(), 2u) << j.dump();
    ASSERT_EQ(j.at("gpu_uuids").size(), 2u) << j.dump();
    for (size_t k = 0; k < 2; ++k) {
      int index = j["gpu_indices"][k].get<int>();
      auto [it, fresh] = holder.emplace(std::make_pair(h, index), j["id"].get<int64_t>());
      EXPECT_TRUE(fresh) << "GPU " << h << "/" << index << " given to jobs " << it->second
                         << " and " << j["id"];
      EXPECT_EQ(j["gpu_uuids"][k], uuidOf[h][index]) << j.dump();
    }
  }
  EXPECT_EQ(holder.size(), 8u);

  // `host show` agrees on who holds what.
  std::map<std::pair<std::string, int>, int64_t> shown;
  for (const char* h : {"gpu-a", "gpu-b"}) {
    json hostJson = host(h);
    for (const auto& a : hostJson.at("allocations")) {
      shown[{h, a.at("gpu_index").get<int>()}] = a.at("job_id").get<int64_t>();
    }
  }
  EXPECT_EQ(shown, holder);

  // Each job saw exactly its own GPUs in CUDA_VISIBLE_DEVICES.
  for (const auto& j : jobs) {
    std::string want = joinStrings(strings(j["gpu_uuids"]), ",") + "\n";
    std::string got;
    EXPECT_TRUE(waitFor([&] { return (got = logs(alice, j["id"].get<int64_t>())) == want; }))
        << "job " << j["id"] << " printed '" << got << "', expected '" << want << "'";
  }

  // All 8 GPUs are taken: a fifth job waits, and says why.
  int64_t fifth = submit(alice, {"--gpus", "2"}, printGpusAndHold(release));
  json waiting;
  ASSERT_TRUE(waitFor([&] {
    waiting = job(alice, fifth);
    return waiting.contains("position") && waiting["position"].is_number_integer();
  })) << waiting.dump();
  EXPECT_EQ(waiting["state"], "queued") << waiting.dump();
  ASSERT_TRUE(waiting["reason"].is_string()) << waiting.dump();
  EXPECT_FALSE(waiting["reason"].get<std::string>().empty());
  EXPECT_EQ(waiting["position"], 1) << waiting.dump();

  writeFile(release, "");
  for (int64_t id : ids) {
    json j;
    EXPECT_TRUE(waitForJobState(alice, id, "succeeded", &j));
    EXPECT_EQ(j["exit_code"], 0) << j.dump();
  }
  json f;
  ASSERT_TRUE(waitForJobState(alice, fifth, "succeeded", &f));
  ASSERT_EQ(f.at("gpu_uuids").size(), 2u) << f.dump();
  EXPECT_EQ(logs(alice, fifth), joinStrings(strings(f["gpu_uuids"]), ",") + "\n");
}

// Like Slurm, a job no host could ever run is refused at submission, with the reason; with
// --queue-anyway (hosts about to join) it waits, saying why, and holds up nothing that can run.
TEST_F(SchedulingTest, JobLargerThanAnyHostIsRefusedOrQueuedAnywayWithReason) {
  startAgent("gpu-a", "sim:4xA100");
  createTeam("ml");
  std::string bob = createUser("bob", "ml");

  CliResult refused = cliAs(bob, {"run", "--gpus", "16", "--", "true"});
  EXPECT_NE(refused.code, 0) << refused.describe();
  EXPECT_NE(refused.err.find("gpus: no host of contour 'dev' open to team 'ml' has 16 GPUs"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("the most on one host is 4"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--queue-anyway"), std::string::npos) << refused.err;
  refused = cliAs(bob, {"run", "--gpus", "1", "--gpu-model", "V100", "--", "true"});
  EXPECT_NE(refused.err.find("gpu_models:"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("(it offers A100)"), std::string::npos) << refused.err;
  EXPECT_TRUE(cliJson(bob, {"job", "list"}).empty()) << "a refused job is not stored";

  int64_t big = submit(bob, {"--gpus", "16", "--queue-anyway"}, {"true"});
  json j;
  ASSERT_TRUE(waitFor([&] {
    j = job(bob, big);
    return j.contains("position") && j["position"].is_number_integer();
  })) << "no queue position for job "
      << big << ": " << j.dump();
  EXPECT_EQ(j["state"], "queued") << j.dump();
  ASSERT_TRUE(j["reason"].is_string()) << j.dump();
  EXPECT_NE(j["reason"].get<std::string>().find("has 16 GPUs (the largest has 4)"),
            std::string::npos)
      << j.dump();
  EXPECT_GE(j["position"].get<int>(), 1);

  // `run --wait` says why it waits while it waits, as `job explain` would.
  auto waiting = spawnCliAs(bob, {"run", "--wait", "--gpus", "8", "--queue-anyway", "--", "true"},
                            "wait");
  ASSERT_TRUE(waitFor([&] {
    return waiting->stderrText().find(" queued: no host team ml may use has 8 GPUs") !=
           std::string::npos;
  })) << waiting->stderrText();
  EXPECT_TRUE(waiting->running());
  waiting->signal(SIGINT);
  waiting->wait();

  // It cannot ever run, so it does not hold up work that can.
  int64_t small = submit(bob, {"--gpus", "1"}, {"true"});
  EXPECT_TRUE(waitForJobState(bob, small, "succeeded"));

  j = job(bob, big);
  EXPECT_EQ(j["state"], "queued") << j.dump();
  EXPECT_NE(textOf(j, "reason").find("has 16 GPUs (the largest has 4)"), std::string::npos)
      << j.dump();
  // `job list` shows the same reason.
  bool listed = false;
  for (const auto& e : cliJson(bob, {"job", "list", "--state", "queued"})) {
    if (e.value("id", int64_t{0}) != big) continue;
    listed = true;
    EXPECT_NE(textOf(e, "reason").find("has 16 GPUs (the largest has 4)"), std::string::npos)
        << e.dump();
  }
  EXPECT_TRUE(listed) << "job " << big << " missing from `job list --state queued`";
}

// A kind of capacity is model x owner x mode x driver x CUDA x lease hold x contour; the
// scheduler once modelled at most 64 and, past that, placed nothing for anyone. Four hosts of 52
// GPUs, each GPU its own model, make 208 kinds: every team's work still places, on the kinds it
// asks for, the last ones included.
class WideFleetTest : public TestCluster {
 protected:
  std::vector<std::string> serverFlags() const override {
    // A host's CPU and memory are split over its kinds in proportion to their GPUs: a 52-kind
    // host on this machine has a few dozen millicpu per kind, under the default floor of 100 for
    // jobs that ask none.
    writeFile(path("allotd.toml"),
              "[limits]\njob_cpu_floor_millis = 10\njob_memory_floor_mib = 16\n");
    return {"--heartbeat", "1s", "--config", path("allotd.toml")};
  }
};

TEST_F(WideFleetTest, AFleetOfMoreThan200KindsStillPlacesEveryTeamsWork) {
  auto model = [](int i) {
    char name[8];
    std::snprintf(name, sizeof name, "K%03d", i);
    return std::string(name);
  };
  for (int h = 0; h < 4; ++h) {
    std::string spec = "sim:";
    for (int g = 0; g < 52; ++g) spec += (g ? ",1x" : "1x") + model(h * 52 + g);
    startAgent("wide-" + std::to_string(h), spec);
  }
  const auto [alice, bob] = createTwoTeams("red", "alice", "blue", "bob");
  std::vector<std::pair<std::string, int64_t>> jobs = {
      {alice, submit(alice, {"--gpus", "1", "--gpu-model", model(207)}, {"sleep", "60"})},
      {alice,
       submit(alice, {"--gpus", "1", "--gpu-model", model(130) + "," + model(3)}, {"sleep", "60"})},
      {bob, submit(bob, {"--gpus", "1", "--gpu-model", model(150)}, {"sleep", "60"})},
      {bob, submit(bob, {"--gpus", "1"}, {"sleep", "60"})},
  };
  std::vector<json> seen(jobs.size());
  ASSERT_TRUE(waitFor([&] {
    for (size_t i = 0; i < jobs.size(); ++i) {
      seen[i] = job(jobs[i].first, jobs[i].second);
      if (textOf(seen[i], "state") != "running") return false;
    }
    return true;
  })) << json(seen).dump();
  // On the model asked: K207 is the last GPU of the last host.
  EXPECT_EQ(textOf(seen[0], "host"), "wide-3") << seen[0].dump();
  EXPECT_EQ(seen[0]["gpu_indices"], json::array({51})) << seen[0].dump();
  EXPECT_EQ(textOf(seen[2], "host"), "wide-2") << seen[2].dump();
  EXPECT_EQ(seen[2]["gpu_indices"], json::array({150 - 104})) << seen[2].dump();
  auto metrics = httpRequest(port_, "GET", "/metrics", "", adminToken_);
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("allot_scheduling_refused_passes_total 0"), std::string::npos);
}

}  // namespace
}  // namespace allot::it
