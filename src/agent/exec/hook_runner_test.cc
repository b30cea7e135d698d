// The hook runner with real processes: the shipped example playbook through a real
// ansible-playbook, a failing script, and a timeout that kills the hook's whole process group.

#include "agent/exec/hook_runner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/test_dirs.h"

namespace allot::agent {
namespace {
namespace fs = std::filesystem;
using testdirs::fileText;

class HookRunnerTest : public testdirs::TempDirTest {
 protected:
  HookRunnerTest() : TempDirTest("hook") {}

  std::string script(const std::string& body) {
    std::string p = dir_ + "/hook.sh";
    std::ofstream(p) << "#!/bin/sh\n" << body;
    fs::permissions(p, fs::perms::owner_all);
    return p;
  }
  HookRun run(const std::string& kind, const std::string& path, int64_t timeoutMs) {
    HookRun r;
    r.spec = {7, "default", "ml", kind, path, timeoutMs};
    r.vars = {{"allot_host", "gpu-a"},
              {"allot_team", "ml"},
              {"allot_profile", "default"},
              {"allot_driver_version", "550.54.15"},
              {"allot_state_dir", dir_ + "/state"}};
    r.runDir = dir_ + "/run";
    return r;
  }
};

bool haveAnsible() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');)
    if (::access((d + "/ansible-playbook").c_str(), X_OK) == 0) return true;
  return false;
}

TEST_F(HookRunnerTest, ShippedExamplePlaybookRunsWithRealAnsible) {
  if (!haveAnsible())
    GTEST_SKIP() << "ansible-playbook is not installed (scripts/install-deps.sh installs Debian's "
                    "ansible-core)";
  auto r =
      runHook(run("playbook", ALLOT_SOURCE_DIR "/deploy/ansible/profiles/default.yml", 300'000));
  ASSERT_TRUE(r.ok) << r.output;
  EXPECT_EQ(r.id, 7);
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.output.find("PLAY RECAP"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("failed=0"), std::string::npos) << r.output;
  // The system tasks are skipped without allot_apply_system.
  EXPECT_NE(r.output.find("skipping"), std::string::npos) << r.output;
  auto marker = nlohmann::json::parse(fileText(dir_ + "/state/profile.json"), nullptr, false);
  ASSERT_TRUE(marker.is_object()) << fileText(dir_ + "/state/profile.json");
  EXPECT_EQ(marker.value("team", ""), "ml");
  EXPECT_EQ(marker.value("profile", ""), "default");
  EXPECT_EQ(marker.value("driver_version", ""), "550.54.15");
  EXPECT_EQ(marker.value("host", ""), "gpu-a");
  // The generated inventory names this host, reached without ssh.
  EXPECT_NE(fileText(dir_ + "/run/inventory.ini").find("localhost ansible_connection=local"),
            std::string::npos);
}

TEST_F(HookRunnerTest, FailingScriptFailsWithItsOutputAndSeesTheVars) {
  auto r = runHook(run("script",
                       script("echo \"wiping $ALLOT_HOST for $ALLOT_TEAM\"\n"
                              "echo 'no such disk' >&2\nexit 3\n"),
                       60'000));
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_NE(r.output.find("wiping gpu-a for ml"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no such disk"), std::string::npos) << r.output;
}

TEST_F(HookRunnerTest, TimeoutKillsTheWholeProcessGroup) {
  const std::string pidFile = dir_ + "/child.pid";
  auto r = runHook(
      run("script", script("echo started\nsleep 600 &\necho $! > " + pidFile + "\nwait\n"), 500));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.timedOut);
  EXPECT_NE(r.output.find("started"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("timeout"), std::string::npos) << r.output;
  // The background child went with the hook: it was in its process group.
  const pid_t child = std::stoi(fileText(pidFile));
  for (int i = 0; i < 200 && ::kill(child, 0) == 0; ++i) ::usleep(10'000);
  EXPECT_NE(::kill(child, 0), 0) << "the hook's child " << child << " outlived the timeout";
}

TEST_F(HookRunnerTest, OutputIsBoundedToItsTail) {
  auto r =
      runHook(run("script", script("head -c 600000 /dev/zero | tr '\\0' x\necho END\n"), 60'000));
  ASSERT_TRUE(r.ok) << r.output.substr(0, 200);
  EXPECT_LT(r.output.size(), kMaxHookOutput + 100);
  EXPECT_NE(r.output.find("earlier bytes not kept"), std::string::npos);
  EXPECT_EQ(r.output.substr(r.output.size() - 4), "END\n");
}

TEST_F(HookRunnerTest, MissingScriptFailsSayingWhy) {
  auto r = runHook(run("script", dir_ + "/nope.sh", 60'000));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.output.find("nope.sh"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace allot::agent
