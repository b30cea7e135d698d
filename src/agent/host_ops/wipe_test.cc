// The wipe against real files and real processes: what a previous tenant leaves must be gone,
// and nothing outside the roots touched.
#include "agent/host_ops/wipe.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/gpu/nvml_gpu_provider.h"
#include "agent/gpu/simulated_gpu_provider.h"
#include "agent/test_dirs.h"

namespace allot::agent {
namespace {
namespace fs = std::filesystem;

void writeFile(const fs::path& p, const std::string& data) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << data;
}

// Starts `sleep 1000` as a daemon (double fork, setsid: reparented away from this process, as a
// job's daemon would be) with ALLOT_JOB_ID and the test's marker in its environment; its pid.
int startStray(const std::string& marker) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  pid_t child = ::fork();
  if (child == 0) {
    ::setsid();
    pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      char id[] = "ALLOT_JOB_ID=42";
      std::string m = marker;
      char* envp[] = {id, m.data(), nullptr};
      char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("1000"), nullptr};
      ::execve("/bin/sleep", argv, envp);
      ::_exit(127);
    }
    ::write(fds[1], &grandchild, sizeof grandchild);
    ::_exit(0);
  }
  ::close(fds[1]);
  pid_t pid = -1;
  ::read(fds[0], &pid, sizeof pid);
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  return pid;
}

bool alive(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), {});
  auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() && s[close + 2] != 'Z';
}

// Waits (bounded) until the stray has exec'd sleep, so its environment is the one given.
void waitForExec(int pid) {
  for (int i = 0; i < 200; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
    std::string comm;
    in >> comm;
    if (comm == "sleep") return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

class WipeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testdirs::perTestDir("wipe-test");
    work_ = root_ / "work";
    scratch_ = root_ / "scratch";
    home_ = root_ / "home";
    outside_ = root_ / "outside";
    fs::create_directories(work_);
    fs::create_directories(scratch_);
    fs::create_directories(home_);
    writeFile(outside_ / "precious.txt", "not the tenant's");
    writeFile(work_ / "credential.json", "{}");
    writeFile(work_ / "jobs/1/output.log", std::string(100'000, 'x'));
    writeFile(work_ / "jobs/1/work/model.ckpt", "weights");
    writeFile(work_ / "jobs/2/sim_gpu_util", "50");
    writeFile(scratch_ / "1/tmp.bin", "scratch");
    writeFile(home_ / "alice/.bashrc", "alias x=y");
    writeFile(work_ / "hooks/7/output.log", "old run");
    writeFile(work_ / "hooks/9/output.log", "this run");
    // A tenant's symlinks out of the roots: the links go, their targets stay.
    fs::create_symlink(outside_, scratch_ / "link-to-outside");
    fs::create_symlink(outside_, home_ / "alice" / "link-to-outside");
    marker_ = "ALLOT_WIPE_TEST=" + std::to_string(::getpid());
  }
  void TearDown() override {
    for (int pid : strays_) ::kill(pid, SIGKILL);
    fs::remove_all(root_);
  }
  WipeOptions options(bool home) {
    WipeOptions o;
    o.step.home = home;
    o.workDir = work_.string();
    o.scratchDir = scratch_.string();
    o.homeDir = home_.string();
    o.currentHookRun = 9;
    o.strayMarker = marker_;
    return o;
  }

  fs::path root_, work_, scratch_, home_, outside_;
  std::string marker_;
  std::vector<int> strays_;
};

TEST_F(WipeTest, RemovesEveryTraceOfTheTenantAndKillsItsStrayProcesses) {
  strays_ = {startStray(marker_), startStray(marker_)};
  for (int pid : strays_) {
    ASSERT_GT(pid, 0);
    waitForExec(pid);
    ASSERT_TRUE(alive(pid));
  }
  auto gpus = SimulatedGpuProvider::create("sim:2xH100", "wipe-test");
  ASSERT_TRUE(gpus.ok());
  WipeOptions o = options(true);
  o.gpus = gpus->get();
  std::string streamed;
  WipeResult r = runWipe(o, [&](std::string_view s) { streamed += s; });

  ASSERT_TRUE(r.ok) << r.reason << "\n" << r.output;
  EXPECT_EQ(streamed, r.output);
  for (int pid : strays_) EXPECT_FALSE(alive(pid)) << pid;
  EXPECT_TRUE(fs::is_empty(work_ / "jobs"));
  EXPECT_TRUE(fs::is_empty(scratch_));
  EXPECT_TRUE(fs::is_empty(home_));
  EXPECT_TRUE(fs::exists(home_));  // the roots themselves stay
  EXPECT_FALSE(fs::exists(work_ / "hooks/7"));
  EXPECT_TRUE(fs::exists(work_ / "hooks/9/output.log"));  // the running task's
  EXPECT_TRUE(fs::exists(work_ / "credential.json"));
  EXPECT_TRUE(fs::exists(outside_ / "precious.txt"));
  EXPECT_NE(r.output.find("removed 2 job directories"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("killed 2 stray processes: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(std::to_string(strays_[0]) + " (sleep"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("GPU 1: free (0 MiB used, no processes)"), std::string::npos) << r.output;
}

// A tenant can leave a tree far deeper than the agent may hold directories open: the wipe still
// removes it, so no tenant keeps a host from its next team. (fs::remove_all held a descriptor
// per level and failed.)
TEST_F(WipeTest, RemovesATreeDeeperThanTheDescriptorsTheAgentMayHold) {
  fs::path deep = home_ / "alice" / "deep";
  fs::create_directories(deep);
  for (int i = 0; i < 300; ++i) deep /= "d";  // 300 levels: under PATH_MAX, over the limit below
  fs::create_directories(deep);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlim_t open = 0;
    for (const auto& e : fs::directory_iterator("/proc/self/fd")) open += e.exists() ? 1 : 0;
    const rlim_t limit = open + 100;
    rlimit r{limit, limit};
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0) ::_exit(100);
    ::_exit(runWipe(options(true)).ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "100: setrlimit failed; 1: the wipe failed";
  EXPECT_TRUE(fs::is_empty(home_));
  EXPECT_TRUE(fs::exists(outside_ / "precious.txt"));
}

TEST_F(WipeTest, LeavesNothingOfTheTenantsSessionsOrTeamDirectories) {
  // What sessions and team storage leave (issue 18): a user's local session home, the team's
  // directory, and a session's host key and authorized keys.
  writeFile(root_ / "session-homes/alice/notebook.ipynb", "{}");
  writeFile(root_ / "teams/vision/dataset.csv", "a,b");
  writeFile(work_ / "session-ssh/12/host_key", "PRIVATE KEY");
  writeFile(work_ / "session-ssh/12/authorized_keys", "ssh-ed25519 AAAA alice");
  WipeOptions o = options(true);
  o.sessionHomeDir = (root_ / "session-homes").string();
  o.teamDir = (root_ / "teams").string();
  WipeResult r = runWipe(o);
  ASSERT_TRUE(r.ok) << r.reason << "\n" << r.output;
  EXPECT_TRUE(fs::is_empty(root_ / "session-homes"));
  EXPECT_TRUE(fs::is_empty(root_ / "teams"));
  EXPECT_TRUE(fs::is_empty(work_ / "session-ssh"));
  EXPECT_NE(r.output.find("removed 1 session homes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("removed 1 team directories"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("removed 1 session SSH set-ups"), std::string::npos) << r.output;
  // The storage policy that keeps homes keeps these homes too; SSH set-ups go regardless.
  writeFile(root_ / "session-homes/alice/notebook.ipynb", "{}");
  writeFile(work_ / "session-ssh/13/host_key", "PRIVATE KEY");
  o.step.home = false;
  r = runWipe(o);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_TRUE(fs::exists(root_ / "session-homes/alice/notebook.ipynb"));
  EXPECT_TRUE(fs::is_empty(work_ / "session-ssh"));
}

TEST_F(WipeTest, RemovesJobRecordsKeptOnAStateDirOfTheirOwn) {
  // allot-agent --state-dir: a job's spec (its environment with it) lives apart from its data.
  writeFile(root_ / "state/jobs/1/spec.json", R"({"env":{"TOKEN":"the tenant's"}})");
  WipeOptions o = options(true);
  o.stateDir = (root_ / "state").string();
  WipeResult r = runWipe(o);
  ASSERT_TRUE(r.ok) << r.reason << "\n" << r.output;
  EXPECT_TRUE(fs::is_empty(root_ / "state/jobs"));
  EXPECT_NE(r.output.find("removed 1 job records"), std::string::npos) << r.output;

  // Its jobs root turned into a symlink (to anywhere) is refused, not followed.
  fs::remove_all(root_ / "state/jobs");
  fs::create_symlink(outside_, root_ / "state/jobs");
  r = runWipe(o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("symlink"), std::string::npos) << r.reason;
  EXPECT_TRUE(fs::exists(outside_ / "precious.txt"));
}

TEST_F(WipeTest, KeepsHomesWhenThePolicySaysSo) {
  WipeResult r = runWipe(options(false));
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_TRUE(fs::exists(home_ / "alice/.bashrc"));
  EXPECT_TRUE(fs::is_empty(scratch_));
  EXPECT_NE(r.output.find("home data: kept"), std::string::npos) << r.output;
}

TEST_F(WipeTest, SaysSoWhenTheHostKeepsNoHomes) {
  WipeOptions o = options(true);
  o.homeDir = "";
  WipeResult r = runWipe(o);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_NE(r.output.find("keeps no team home data"), std::string::npos) << r.output;
}

TEST_F(WipeTest, RefusesWhileAJobRuns) {
  WipeOptions o = options(true);
  o.liveJobs = {17};
  WipeResult r = runWipe(o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("jobs still run on this host (17)"), std::string::npos) << r.reason;
  EXPECT_TRUE(fs::exists(work_ / "jobs/1/output.log"));  // nothing touched
}

TEST_F(WipeTest, RefusesARootThatIsASymlink) {
  fs::remove_all(home_);
  fs::create_symlink(outside_, home_);
  WipeResult r = runWipe(options(true));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("is a symlink"), std::string::npos) << r.reason;
  EXPECT_TRUE(fs::exists(outside_ / "precious.txt"));
}

TEST_F(WipeTest, NeverRemovesTheWorkDirectoryEvenUnderAMisconfiguredRoot) {
  WipeOptions o = options(true);
  o.homeDir = root_.string();  // the work directory is root_/work
  WipeResult r = runWipe(o);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_TRUE(fs::exists(work_ / "credential.json"));
  EXPECT_FALSE(fs::exists(outside_));
  EXPECT_NE(r.output.find("kept " + work_.string() + ": it holds the agent's work directory"),
            std::string::npos)
      << r.output;
}

TEST_F(WipeTest, KillsWhatNvmlSeesOnAGpuThenFailsNamingAGpuThatStaysBusy) {
  // A process on a GPU with no ALLOT_JOB_ID (say, started by hand): NVML names it, so it goes.
  int onGpu = startStray("UNRELATED=1");
  strays_ = {onGpu};
  waitForExec(onGpu);
  setenv("FAKE_NVML_PIDS", std::to_string(onGpu).c_str(), 1);
  setenv("FAKE_NVML_MEM_USED_MIB", "0", 1);
  auto nvml = NvmlGpuProvider::open(ALLOT_FAKE_NVML_PATH);
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  WipeOptions o = options(true);
  o.gpus = nvml->get();
  o.gpuFreeWaitMs = 300;
  WipeResult r = runWipe(o);
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_FALSE(alive(onGpu));
  EXPECT_NE(r.output.find(std::to_string(onGpu) + " (sleep, on GPU 0)"), std::string::npos)
      << r.output;

  // Memory the driver does not give back: the wipe fails, naming the GPU.
  setenv("FAKE_NVML_MEM_USED_MIB", "40960", 1);
  r = runWipe(o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("GPU 0 is not free: 40960 MiB used (at most 1437 allowed)"),
            std::string::npos)
      << r.reason;
  unsetenv("FAKE_NVML_PIDS");
  unsetenv("FAKE_NVML_MEM_USED_MIB");
}

}  // namespace
}  // namespace allot::agent
