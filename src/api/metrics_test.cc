#include "api/metrics.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace allot::api {
namespace {

constexpr TimeMs kNow = 1'700'000'000'000;

control::World sampleWorld() {
  control::World w;
  model::Host h;
  h.name = "gpu-01";
  h.state = model::HostState::kOnline;
  h.simulated = true;
  for (int i = 0; i < 2; ++i) {
    model::Gpu g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    g.model = "A100";
    h.gpus.push_back(g);
  }
  h.gpus[1].shared = true;
  w.hosts[h.name] = h;
  model::Job whole;
  whole.id = 1;
  whole.team = "ml";
  whole.project = "llm \"big\"";  // a label value that needs escaping
  whole.user = "alice";
  whole.state = model::JobState::kRunning;
  whole.ranks = {{.host = "gpu-01", .gpuIndices = {0}}};
  model::Job half = whole;
  half.id = 2;
  half.ranks[0].gpuIndices = {1};
  half.resources.gpuMilli = 500;
  model::Job done = whole;
  done.id = 3;
  done.state = model::JobState::kPreempted;
  done.ranks.clear();
  for (const auto& j : {whole, half, done}) w.jobs[j.id] = j;
  w.nextJobId = 4;
  w.reindex();
  w.quotaStatus["ml"] = {4, 1.5, 0, 2.5, 0.4, true};
  // GPU 1 (held by half of job 2) reports everything; GPU 0 is on a driver without ECC or power.
  model::GpuSample full;
  full.index = 1;
  full.utilizationPct = 70;
  full.memoryUsedMib = 1024;
  full.temperatureC = 61;
  full.powerW = 312.5;
  full.smClockMhz = 1980;
  full.eccCorrected = 3;
  full.eccUncorrected = 0;
  model::GpuSample partial;
  partial.index = 0;
  partial.utilizationPct = 5;
  w.telemetry["gpu-01"][1] = {full, kNow - 500, kNow - 500, 5000};
  w.telemetry["gpu-01"][0] = {partial, kNow - 500, kNow - 500, 5000};
  return w;
}

// Fails the test for each of `series` (a whole line or the start of one) that `out` lacks.
void expectSeries(const std::string& out, const std::vector<std::string>& series) {
  for (const std::string& s : series) {
    EXPECT_NE(out.find(s), std::string::npos) << "no " << s << " in:\n" << out;
  }
}

// Attack: HTTP lets a method be any token up to the header limit, and the request counter is
// labelled by method. Made-up methods share one label, so a client sending a new one per request
// grows neither allotd's memory nor /metrics.
TEST(Metrics, MadeUpMethodsShareOneLabel) {
  ServerMetrics m;
  for (int i = 0; i < 1000; ++i)
    m.request("(unmatched)", "X" + std::string(1000, 'A') + std::to_string(i), 404, 0.001);
  m.request("(unmatched)", "GET", 404, 0.001);
  m.request("(unmatched)", "get", 404, 0.001);  // methods are case-sensitive: not GET
  EXPECT_EQ(m.requests.size(), 2u);
  EXPECT_EQ((m.requests[{"(unmatched)", "OTHER", 404}]), 1001u);
  EXPECT_EQ((m.requests[{"(unmatched)", "GET", 404}]), 1u);
}

TEST(Metrics, NamesWhoHoldsEachGpuAndCountsJobs) {
  ServerMetrics m;
  m.request("/api/v1/jobs", "POST", 201, 0.002);
  m.schedulingPass(0.0004, 0.0001, 2);
  expectSeries(
      renderMetrics(sampleWorld(), m, kNow),
      {
          "allot_host_up{host=\"gpu-01\",simulated=\"true\"} 1\n",
          "allot_gpu_allocated{host=\"gpu-01\",gpu=\"1\",uuid=\"GPU-1\",model=\"A100\","
          "team=\"ml\",project=\"llm \\\"big\\\"\",user=\"alice\",job=\"2\"} 0.5\n",
          "allot_hosts_admin{admin_state=\"available\"} 1\n",
          "allot_hosts_admin{admin_state=\"draining\"} 0\n",
          "allot_jobs{state=\"running\"} 2\n",
          "allot_jobs_ended_total{state=\"preempted\"} 1\n",
          "allot_preemptions_total 1\n",
          "allot_jobs_submitted_total 3\n",
          "allot_team_gpus{team=\"ml\",kind=\"borrowed\"} 0\n",
          "allot_scheduling_pass_duration_seconds_bucket{le=\"0.0005\"} 1\n",
          "allot_scheduling_pass_io_thread_seconds_bucket{le=\"0.0005\"} 1\n",
          "allot_api_requests_total{route=\"/api/v1/jobs\",method=\"POST\",code=\"201\"} 1",
      });
}

TEST(Metrics, GpuTelemetryGaugesInBaseUnitsLabelledWithTheHolder) {
  ServerMetrics m;
  std::string out = renderMetrics(sampleWorld(), m, kNow);
  const std::string labels =
      "host=\"gpu-01\",gpu=\"1\",uuid=\"GPU-1\",model=\"A100\",team=\"ml\","
      "project=\"llm \\\"big\\\"\",user=\"alice\"";
  const std::string held = "{" + labels + "}";
  expectSeries(out, {
                        "allot_gpu_utilization_ratio" + held + " 0.7\n",
                        "allot_gpu_memory_used_bytes" + held + " 1073741824\n",
                        "allot_gpu_temperature_celsius" + held + " 61\n",
                        "allot_gpu_power_watts" + held + " 312.5\n",
                        "allot_gpu_sm_clock_hertz" + held + " 1980000000\n",
                        "allot_gpu_ecc_errors_total{" + labels + ",kind=\"corrected\"} 3\n",
                        "# TYPE allot_gpu_ecc_errors_total counter\n",
                        // GPU 0 is held by job 1 too; it has only utilisation.
                        "allot_gpu_utilization_ratio{host=\"gpu-01\",gpu=\"0\"",
                    });
  // ... and no series for what it lacks.
  EXPECT_EQ(out.find("allot_gpu_power_watts{host=\"gpu-01\",gpu=\"0\""), std::string::npos);
}

TEST(Metrics, StaleTelemetryHasNoSeries) {
  ServerMetrics m;
  // Three 5 s intervals after the last sample: the agent is gone or stuck.
  std::string out = renderMetrics(sampleWorld(), m, kNow - 500 + 15'000);
  EXPECT_EQ(out.find("allot_gpu_utilization_ratio{"), std::string::npos) << out;
  EXPECT_NE(out.find("# TYPE allot_gpu_utilization_ratio gauge"), std::string::npos);
}

TEST(Metrics, AnIdleGpuHasTelemetryWithoutHolderLabels) {
  control::World w = sampleWorld();
  w.jobs.erase(2);
  w.reindex();
  std::string out = renderMetrics(w, ServerMetrics(), kNow);
  EXPECT_NE(out.find("allot_gpu_utilization_ratio{host=\"gpu-01\",gpu=\"1\",uuid=\"GPU-1\","
                     "model=\"A100\"} 0.7\n"),
            std::string::npos)
      << out;
}

// The exposition format as Prometheus itself reads it: promtool (Debian's prometheus package,
// installed by scripts/install-deps.sh) lints the whole output.
TEST(Metrics, PromtoolAcceptsTheOutput) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed (scripts/install-deps.sh installs it)";
  }
  ServerMetrics m;
  m.request("/api/v1/jobs/{id}", "GET", 404, 0.0001);
  m.schedulingPass(0.01, 0.002, 1);
  auto path = std::filesystem::temp_directory_path() /
              ("allot-metrics-" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream f(path);
    f << renderMetrics(sampleWorld(), m, kNow);
  }
  std::string cmd = "promtool check metrics < " + path.string() + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string said;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) said.append(buf, n);
  int rc = ::pclose(p);
  std::filesystem::remove(path);
  EXPECT_EQ(rc, 0) << said;
  EXPECT_EQ(said, "") << said;  // no lint findings either
}

}  // namespace
}  // namespace allot::api
