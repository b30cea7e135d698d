// Rolling upgrades with real processes: allotd walks a pool of three simulated hosts one at a
// time through drain, a real hook script run by each host's real agent, a health check and
// resume. The script fails on the second host: the upgrade stops there and says so, and the third
// host is never touched. Also: each host reports its driver and CUDA versions.

#include "harness.h"
#include "hook_cluster.h"

namespace allot::it {
namespace {

class UpgradeTest : public HookCluster {
 protected:
  std::vector<std::string> serverFlags() const override {
    // The agent gives scripts their vars as ALLOT_* environment variables.
    const std::string driver = writeScript(
        "driver.sh",
        "#!/bin/sh\n"
        "echo \"installing driver 550 on $ALLOT_HOST\"\n"
        "if [ \"$ALLOT_HOST\" = gpu-b ]; then echo 'dkms build failed' >&2; exit 3; fi\n"
        "exit 0\n");
    return flagsWithConfig("[hooks.profiles.driver-550]\nscript = \"" + driver + "\"\n");
  }
};

TEST_F(UpgradeTest, StopsAtTheFailingHostAndLeavesTheRestUntouched) {
  for (const char* h : {"gpu-a", "gpu-b", "gpu-c"}) startAgent(h, "sim:1xA100");
  EXPECT_EQ(textOf(host("gpu-a"), "driver_version"), "550.54.15");
  EXPECT_EQ(textOf(host("gpu-a"), "cuda_version"), "12.4");

  // Bad input: 400 naming the field, and nothing starts.
  HttpResult bad = httpRequest(port_, "POST", "/api/v1/upgrades",
                               R"({"pool":"shared","profile":"gold"})", adminToken_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("\"profile\""), std::string::npos) << bad.body;
  bad = httpRequest(port_, "POST", "/api/v1/upgrades",
                    R"({"pool":"shared","profile":"driver-550","max_unavailable":0})", adminToken_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("max_unavailable"), std::string::npos) << bad.body;
  CliResult typo = cli(
      {"host", "upgrade", "--pool", "shared", "--hook", "driver-550", "--drain-deadline", "soon"});
  EXPECT_NE(typo.code, 0) << typo.describe();
  EXPECT_EQ(cliJson(adminToken_, {"host", "upgrades"}).size(), 0u);

  const size_t cBefore = cliJson(adminToken_, {"host", "log", "gpu-c"}).size();
  CliResult r = cli({"host", "upgrade", "--pool", "shared", "--hook", "driver-550", "--wait"});
  EXPECT_NE(r.code, 0) << r.describe();
  EXPECT_NE(r.err.find("stopped at gpu-b"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("exit code 3"), std::string::npos) << r.describe();

  json u = cliJson(adminToken_, {"host", "upgrades", "1"});
  EXPECT_EQ(textOf(u, "state"), "stopped") << u.dump();
  EXPECT_EQ(textOf(u, "stopped_at"), "gpu-b") << u.dump();
  ASSERT_EQ(u["hosts"].size(), 3u) << u.dump();
  EXPECT_EQ(textOf(u["hosts"][0], "state"), "done") << u.dump();
  EXPECT_EQ(textOf(u["hosts"][1], "state"), "failed") << u.dump();
  EXPECT_EQ(textOf(u["hosts"][2], "state"), "skipped") << u.dump();

  EXPECT_EQ(adminState("gpu-a"), "available");
  EXPECT_EQ(adminState("gpu-b"), "failed");
  EXPECT_EQ(adminState("gpu-c"), "available");
  EXPECT_EQ(cliJson(adminToken_, {"host", "log", "gpu-c"}).size(), cBefore)
      << "the third host was never touched";
  json bLog = cliJson(adminToken_, {"host", "log", "gpu-b"});
  EXPECT_NE(textOf(bLog[bLog.size() - 1], "output").find("dkms build failed"), std::string::npos)
      << bLog.dump();

  // The pool is free for the next upgrade once this one stopped.
  CliResult shown = cli({"host", "upgrades"});
  EXPECT_NE(shown.out.find("stopped"), std::string::npos) << shown.out;
}

}  // namespace
}  // namespace allot::it
