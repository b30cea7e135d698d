#include "api/metrics.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace allot::api {
namespace {

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
  whole.host = "gpu-01";
  whole.gpuIndices = {0};
  model::Job half = whole;
  half.id = 2;
  half.gpuIndices = {1};
  half.gpuMilli = 500;
  model::Job done = whole;
  done.id = 3;
  done.state = model::JobState::kPreempted;
  done.host.clear();
  done.gpuIndices.clear();
  for (const auto& j : {whole, half, done}) w.jobs[j.id] = j;
  w.nextJobId = 4;
  w.reindex();
  w.quotaStatus["ml"] = {4, 1.5, 0, 2.5, 0.4, true};
  return w;
}

TEST(Metrics, NamesWhoHoldsEachGpuAndCountsJobs) {
  ServerMetrics m;
  m.request("/api/v1/jobs", "POST", 201, 0.002);
  m.schedulingPass(0.0004, 2);
  std::string out = renderMetrics(sampleWorld(), m);
  EXPECT_NE(out.find("allot_host_up{host=\"gpu-01\",simulated=\"true\"} 1\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("allot_gpu_allocated{host=\"gpu-01\",gpu=\"1\",uuid=\"GPU-1\",model=\"A100\","
                     "team=\"ml\",project=\"llm \\\"big\\\"\",user=\"alice\",job=\"2\"} 0.5\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("allot_jobs{state=\"running\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("allot_jobs_ended_total{state=\"preempted\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("allot_preemptions_total 1\n"), std::string::npos);
  EXPECT_NE(out.find("allot_jobs_submitted_total 3\n"), std::string::npos);
  EXPECT_NE(out.find("allot_team_gpus{team=\"ml\",kind=\"borrowed\"} 0\n"), std::string::npos);
  EXPECT_NE(out.find("allot_scheduling_pass_duration_seconds_bucket{le=\"0.0005\"} 1\n"),
            std::string::npos);
  EXPECT_NE(out.find("allot_api_requests_total{route=\"/api/v1/jobs\",method=\"POST\",code=\"201\"} 1"),
            std::string::npos);
}

// The exposition format as Prometheus itself reads it: promtool (Debian's prometheus package,
// installed by scripts/install-deps.sh) lints the whole output.
TEST(Metrics, PromtoolAcceptsTheOutput) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed (scripts/install-deps.sh installs it)";
  }
  ServerMetrics m;
  m.request("/api/v1/jobs/{id}", "GET", 404, 0.0001);
  m.schedulingPass(0.01, 1);
  auto path = std::filesystem::temp_directory_path() /
              ("allot-metrics-" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream f(path);
    f << renderMetrics(sampleWorld(), m);
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
