// GPU telemetry end to end: a simulated agent samples what its job declares; `allot host show`
// shows it on the job's GPU with the job as holder, and the usage report counts the job's GPU
// time as used by what the samples said, kept in telemetry.db across a restart.

#include <chrono>
#include <fstream>
#include <thread>

#include "harness.h"

namespace allot::it {
namespace {

class TelemetryTest : public TestCluster {
 protected:
  std::vector<std::string> agentFlags() const override { return {"--telemetry-interval", "1s"}; }
};

// The GPU entry of `host show -o json` with this index; null when absent.
json gpuOf(const json& host, int index) {
  for (const auto& g : host.value("gpus", json::array())) {
    if (g.value("index", -1) == index) return g;
  }
  return nullptr;
}

double utilOf(const json& gpu) {
  if (!gpu.is_object() || !gpu.contains("telemetry")) return -1;
  return gpu["telemetry"].value("utilization_pct", -1.0);
}

TEST_F(TelemetryTest, DeclaredUtilisationShowsOnTheJobsGpuWithItsHolder) {
  startAgent("node-a", "sim:2xA100");
  createTeam("ml");
  std::string alice = createUser("alice", "ml");
  // Declares 70% and prints the file through which its utilisation can be changed.
  int64_t id = submit(alice, {"--gpus", "1", "--env", "ALLOT_SIM_GPU_UTIL=70"},
                      {"sh", "-c", "echo \"$ALLOT_SIM_GPU_UTIL_FILE\"; sleep 60"});
  ASSERT_TRUE(waitForJobState(alice, id, "running"));
  json j = job(alice, id);
  const int index = j.at("gpu_indices").at(0).get<int>();

  json h;
  ASSERT_TRUE(waitFor([&] { return utilOf(gpuOf(h = host("node-a"), index)) == 70; })) << h.dump(2);
  json g = gpuOf(h, index);
  ASSERT_EQ(g.at("holders").size(), 1u) << g.dump();
  EXPECT_EQ(g["holders"][0].value("job_id", int64_t{0}), id);
  EXPECT_EQ(g["holders"][0].value("team", ""), "ml");
  EXPECT_EQ(g["holders"][0].value("user", ""), "alice");
  EXPECT_TRUE(g["holders"][0]["since"].is_string()) << g.dump();
  // The other GPU is idle, and says so.
  EXPECT_EQ(utilOf(gpuOf(h, 1 - index)), 0) << h.dump(2);
  EXPECT_TRUE(gpuOf(h, 1 - index).at("holders").empty());

  // A member of another team sees the pool GPU busy and its readings, but not whose job it is.
  createTeam("cv");
  std::string carol = createUser("carol", "cv");
  json theirs = gpuOf(cliJson(carol, {"host", "show", "node-a"}), index);
  ASSERT_EQ(theirs.at("holders").size(), 1u) << theirs.dump();
  EXPECT_TRUE(theirs["holders"][0]["job_id"].is_null()) << theirs.dump();
  EXPECT_TRUE(theirs["holders"][0]["team"].is_null()) << theirs.dump();
  EXPECT_TRUE(theirs["holders"][0]["project"].is_null()) << theirs.dump();
  EXPECT_TRUE(theirs["holders"][0]["user"].is_null()) << theirs.dump();
  EXPECT_EQ(utilOf(theirs), 70) << theirs.dump();

  // What is written to the job's util file while it runs wins.
  std::string file;
  ASSERT_TRUE(waitFor([&] { return !(file = trim(logs(alice, id))).empty(); }));
  ASSERT_EQ(file.front(), '/') << file;
  std::ofstream(file) << "35\n";
  ASSERT_TRUE(waitFor([&] { return utilOf(gpuOf(h = host("node-a"), index)) == 35; })) << h.dump(2);

  // Once the job is gone its GPU is idle again.
  auto r = cli({"job", "cancel", std::to_string(id)});
  EXPECT_EQ(r.code, 0) << r.describe();
  ASSERT_TRUE(waitFor([&] { return utilOf(gpuOf(h = host("node-a"), index)) == 0; })) << h.dump(2);
}

TEST_F(TelemetryTest, TheUsageReportWeighsAllocatedTimeByTheSamples) {
  startAgent("node-a", "sim:2xA100");
  createTeam("ml");
  std::string alice = createUser("alice", "ml");
  // 60% on both GPUs for 4 seconds; the GPUs read 0% only while the job is not yet started.
  int64_t id = submit(alice, {"--gpus", "2", "--env", "ALLOT_SIM_GPU_UTIL=60"}, {"sleep", "4"});
  ASSERT_TRUE(waitForJobState(alice, id, "succeeded"));

  auto row = [&] {
    json report = cliJson(alice, {"report", "usage", "--by", "user", "--from", "-1h"});
    EXPECT_EQ(report.at("rows").size(), 1u) << report.dump();
    return report.at("rows").at(0);
  };
  // A sample sent just after the job ended may still cover its last moments: wait until the
  // figures hold still.
  json r;
  ASSERT_TRUE(waitFor([&] {
    r = row();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return r.at("gpu_hours_used").is_number() && row() == r;
  }));
  const double allocated = r.at("gpu_hours_allocated").get<double>();
  const double measured = r.at("gpu_hours_measured").get<double>();
  const double used = r.at("gpu_hours_used").get<double>();
  EXPECT_GT(measured, 0) << r.dump();
  EXPECT_LE(measured, allocated * 1.0001) << r.dump();
  EXPECT_GT(used, 0) << r.dump();
  EXPECT_LE(used, measured * 0.6 * 1.0001) << "no sample read over 60%: " << r.dump();
  EXPECT_NEAR(r.at("efficiency").get<double>(), used / allocated, 1e-4) << r.dump();
  EXPECT_TRUE(r.at("idle_gpu_hours").is_number()) << r.dump();

  // The GPU's own history: raw samples at 60% while the job ran, kept in telemetry.db.
  const int index = job(alice, id).at("gpu_indices").at(0).get<int>();
  json history = cliJson(alice, {"host", "history", "node-a", std::to_string(index), "--resolution",
                                 "raw", "--from", "-10m"});
  int busy = 0;
  for (const auto& p : history.at("points")) busy += p.value("utilization_pct", -1.0) == 60;
  EXPECT_GE(busy, 1) << history.dump();
  json minutes = cliJson(alice, {"host", "history", "node-a", std::to_string(index)});
  EXPECT_FALSE(minutes.at("points").empty()) << minutes.dump();
  // Bad input names its field; a GPU the host does not have is not found.
  HttpResult bad =
      httpRequest(port_, "GET", "/api/v1/hosts/node-a/gpus/0/history?resolution=weekly", "", alice);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.parsed()["error"].value("field", ""), "resolution") << bad.body;
  bad = httpRequest(port_, "GET", "/api/v1/hosts/node-a/gpus/0/history?from=-1m&to=-2m", "", alice);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/hosts/node-a/gpus/7/history", "", alice).status,
            404);

  // A stop hands what is still in memory to telemetry.db (a crash would lose up to the last
  // second or two, which is allowed: docs/accounting.md), so a restart reports the same.
  restartServerGracefully();
  json again = row();
  EXPECT_EQ(again.at("gpu_hours_used"), r.at("gpu_hours_used")) << again.dump();
  EXPECT_EQ(again.at("idle_gpu_hours"), r.at("idle_gpu_hours")) << again.dump();
}

}  // namespace
}  // namespace allot::it
