// Accounting through the real binaries: a job's GPU time reaches `allot report usage`, priced
// from allotd's [prices], and survives a restart of allotd.

#include <unistd.h>

#include <cmath>

#include "harness.h"

namespace allot::it {
namespace {

class UsageTest : public TestCluster {
 protected:
  void SetUp() override {
    config_ = ::testing::TempDir() + "allotd-usage-" + std::to_string(::getpid()) + ".toml";
    writeFile(config_, "[prices]\nA100 = 2.5\n");
    TestCluster::SetUp();
  }
  void TearDown() override {
    TestCluster::TearDown();
    ::unlink(config_.c_str());
  }
  std::vector<std::string> serverFlags() const override {
    return {"--heartbeat", "1s", "--config", config_};
  }
  std::string config_;
};

TEST_F(UsageTest, AllocatedGpuTimeIsReportedPricedAndKeptAcrossARestart) {
  startAgent("node-a", "sim:2xA100");
  createTeam("ml");
  const std::string alice = createUser("alice", "ml");
  const int64_t id = submit(alice, {"--gpus", "2"}, {"sleep", "1"});
  ASSERT_TRUE(waitForJobState(alice, id, "succeeded"));

  json report = cliJson(alice, {"report", "usage", "--by", "gpu-model", "--from", "-1h"});
  ASSERT_EQ(report.at("rows").size(), 1u) << report.dump();
  const json row = report["rows"][0];
  EXPECT_EQ(row.at("name"), "A100");
  const double hours = row.at("gpu_hours_allocated").get<double>();
  EXPECT_GE(hours, 2 * 1.0 / 3600) << "two GPUs for at least the second it slept";
  EXPECT_LT(hours, 2 * 60.0 / 3600);
  EXPECT_EQ(row.at("peak_gpus").get<double>(), 2);
  EXPECT_EQ(row.at("cost").get<double>(), std::round(hours * 2.5 * 100) / 100);

  restartServer();
  json again = cliJson(alice, {"report", "usage", "--by", "gpu-model", "--from", "-1h"});
  ASSERT_EQ(again.at("rows").size(), 1u) << again.dump();
  EXPECT_EQ(again["rows"][0].at("gpu_hours_allocated").get<double>(), hours);

  CliResult csv = cliAs(alice, {"report", "usage", "--by", "user", "-o", "csv"});
  ASSERT_EQ(csv.code, 0) << csv.describe();
  EXPECT_EQ(csv.out.substr(0, csv.out.find('\n')),
            "name,gpu_hours_allocated,gpu_hours_measured,gpu_hours_used,efficiency,idle_gpu_hours,"
            "peak_gpus,cost");
  EXPECT_EQ(csv.out.find("alice,", csv.out.find('\n')), csv.out.find('\n') + 1) << csv.out;
}

}  // namespace
}  // namespace allot::it
