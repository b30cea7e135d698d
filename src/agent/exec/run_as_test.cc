// The agent's side of "workloads run as their owner": the executor refuses jobs without an
// identity and starts the others as their owner, in directories only the owner reads. The
// switch needs root; those tests are skipped otherwise.

#include "agent/exec/run_as.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "agent/exec/process_executor.h"

namespace allot::agent {
namespace {

namespace fs = std::filesystem;
using model::ActualState;

model::RunAs owner() { return {"alice", 4242, 4242, "red", 4300}; }

JobSpec shellJob(int64_t id, const std::string& script, std::optional<model::RunAs> runAs) {
  JobSpec s;
  s.id = id;
  s.command = {"sh", "-c", script};
  s.runAs = runAs;
  return s;
}

TEST(CheckRunAsTest, RefusesJobsWithoutAnIdentityOrAsRoot) {
  EXPECT_TRUE(checkRunAs(shellJob(1, "true", owner())).ok());
  Status none = checkRunAs(shellJob(1, "true", std::nullopt));
  EXPECT_FALSE(none.ok());
  EXPECT_NE(none.message().find("no Unix identity"), std::string::npos) << none.message();
  model::RunAs root = owner();
  root.uid = 0;
  EXPECT_FALSE(checkRunAs(shellJob(1, "true", root)).ok());
  root = owner();
  root.gid = 0;
  EXPECT_FALSE(checkRunAs(shellJob(1, "true", root)).ok());
}

// Found by a review: ids past 32 bits passed, and the shim's setuid and setgid cut them, so
// 2^32 + 1000 ran as user 1000 and a gid of 2^32 as root's group.
TEST(CheckRunAsTest, RefusesIdsNoHostCanGive) {
  constexpr int64_t k2to32 = int64_t{1} << 32;
  for (auto spoil : std::vector<std::function<void(model::RunAs&)>>{
           [](model::RunAs& r) { r.uid = k2to32 + 1000; },
           [](model::RunAs& r) { r.gid = k2to32; },
           [](model::RunAs& r) { r.teamGid = k2to32; },
           [](model::RunAs& r) { r.uid = k2to32 - 1; },  // (uid_t)-1: "unchanged"
           [](model::RunAs& r) { r.teamGid = -2; }}) {
    model::RunAs r = owner();
    spoil(r);
    Status st = checkRunAs(shellJob(1, "true", r));
    EXPECT_FALSE(st.ok()) << r.uid << " " << r.gid << " " << r.teamGid;
    EXPECT_NE(st.message().find("no host can give"), std::string::npos) << st.message();
  }
  model::RunAs highest = owner();
  highest.uid = highest.gid = model::kMaxUnixId;
  EXPECT_TRUE(checkRunAs(shellJob(1, "true", highest)).ok());
}

// A session's home on storage others may write: made with mkdir itself, so that one planted
// there first (a directory, a link) is "exists", left to the owner's check, never given away.
TEST(MakeDirectoryForTest, MakesAndGivesANewDirectoryAndNeverOneThatWasThere) {
  char tmpl[] = "/tmp/allot-makedir-XXXXXX";
  const std::string root = mkdtemp(tmpl);
  const uid_t me = ::geteuid();
  const gid_t group = ::getegid();
  ASSERT_TRUE(makeDirectoryFor(root + "/alice", me, group, 0700).ok());
  struct stat st {};
  ASSERT_EQ(::lstat((root + "/alice").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(makeDirectoryFor(root + "/alice", me, group, 0700).code(), Code::kAlreadyExists);
  const std::string target = root + "/host-dir";
  ASSERT_EQ(::mkdir(target.c_str(), 0751), 0);
  ASSERT_EQ(::symlink(target.c_str(), (root + "/bob").c_str()), 0);
  EXPECT_EQ(makeDirectoryFor(root + "/bob", me, group, 0700).code(), Code::kAlreadyExists);
  ASSERT_EQ(::lstat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0751u) << "nothing was given through the link";
  std::filesystem::remove_all(root);
}

TEST(ShimIdentityArgsTest, NamesUidGidAndTheTeamGroup) {
  EXPECT_EQ(shimIdentityArgs(owner()),
            (std::vector<std::string>{"--uid", "4242", "--gid", "4242", "--groups", "4300"}));
  model::RunAs noTeam = owner();
  noTeam.teamGid = -1;
  EXPECT_EQ(shimIdentityArgs(noTeam), (std::vector<std::string>{"--uid", "4242", "--gid", "4242"}));
}

class RunAsExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/allot-runas-test-XXXXXX";
    workDir_ = mkdtemp(tmpl);
    exec_ = std::make_unique<ProcessExecutor>(workDir_, ALLOT_JOB_SHIM_PATH, clock_, nullptr, 0);
    exec_->setRunAsOwner(true);
    exec_->setTeamRoot(workDir_ + "/teams");
  }
  void TearDown() override {
    for (const auto& a : exec_->poll()) exec_->forget(a.id);
    exec_.reset();
    fs::remove_all(workDir_);
  }
  model::ActualJob waitForEnd(int64_t id) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      for (const auto& a : exec_->poll()) {
        if (a.id == id && a.state != ActualState::kRunning) return a;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "job " << id << " did not end";
    return {};
  }
  std::string log(int64_t id) {
    std::ifstream in(exec_->logPath(id));
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string jobDir(int64_t id) { return workDir_ + "/jobs/" + std::to_string(id); }

  SystemClock clock_;
  std::string workDir_;
  std::unique_ptr<ProcessExecutor> exec_;
};

TEST_F(RunAsExecutorTest, AJobWithoutAnIdentityFailsToStartInsteadOfRunningAsRoot) {
  auto a = exec_->start(shellJob(1, "touch ran", std::nullopt));
  EXPECT_EQ(a.state, ActualState::kFailedToStart);
  EXPECT_NE(a.message.find("no Unix identity"), std::string::npos) << a.message;
  EXPECT_FALSE(fs::exists(jobDir(1) + "/work/ran"));
}

TEST_F(RunAsExecutorTest, TheWorkloadRunsAsItsOwnerInDirectoriesOnlyTheOwnerReads) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  auto a = exec_->start(
      shellJob(2,
               "echo uid=$(id -u) gid=$(id -g) groups=\"$(id -G)\" home=$HOME user=$USER; "
               "touch mine; touch \"$ALLOT_TEAM_DIR/ours\"; echo team=$ALLOT_TEAM_DIR",
               owner()));
  ASSERT_NE(a.state, ActualState::kFailedToStart) << a.message;
  auto end = waitForEnd(2);
  EXPECT_EQ(end.exitCode, 0) << log(2);
  std::string out = log(2);
  EXPECT_NE(out.find("uid=4242 gid=4242 groups=4242 4300 home=" + jobDir(2) + "/work user=alice"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("team=" + workDir_ + "/teams/red"), std::string::npos) << out;

  struct stat st {};
  ASSERT_EQ(::stat((jobDir(2) + "/work").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4242u);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat(jobDir(2).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, 4242u);
  EXPECT_EQ(st.st_mode & 07777, 0710u);
  ASSERT_EQ(::stat((jobDir(2) + "/work/mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4242u);
  // The log is the owner's alone, the agent's records root's alone: a user who shares the
  // owner's group (gid 100 of a directory) passes the 0710 directory but reads neither.
  ASSERT_EQ(::stat((jobDir(2) + "/output.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4242u);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  for (const char* record : {"spec.json", "status.json"}) {
    if (::stat((jobDir(2) + "/" + record).c_str(), &st) != 0) continue;  // under --state-dir
    EXPECT_EQ(st.st_uid, 0u) << record;
    EXPECT_EQ(st.st_mode & 07777, 0600u) << record;
  }
  ASSERT_EQ(::stat((workDir_ + "/teams/red").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, 4300u);
  EXPECT_EQ(st.st_mode & 07777, 02770u);
  // setgid on the team directory: what a member makes there stays the team's.
  ASSERT_EQ(::stat((workDir_ + "/teams/red/ours").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, 4300u);
}

// Where fs.suid_dumpable is 1, a process of the owner's could ptrace the job's child once it has
// switched to the owner, so the shim forks it instead of sharing its memory with it
// (job_shim_main.cc, childMayShareMemory); the job runs as its owner all the same. The setting is
// the host's: the test shows "1" to the shim alone, bind-mounted over /proc/sys/fs/suid_dumpable
// in a mount namespace of a child process of its own.
TEST_F(RunAsExecutorTest, WhereSuidDumpableIsOneTheJobIsForkedAndRunsAsItsOwner) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  const std::string fake = workDir_ + "/suid_dumpable";
  std::ofstream(fake) << "1\n";
  const std::string nsWork = workDir_ + "/ns";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount(fake.c_str(), "/proc/sys/fs/suid_dumpable", nullptr, MS_BIND, nullptr) != 0)
      ::_exit(10);
    SystemClock clock;
    ProcessExecutor exec(nsWork, ALLOT_JOB_SHIM_PATH, clock, nullptr, 0);
    exec.setRunAsOwner(true);
    auto a = exec.start(
        shellJob(3, "id -u > uid; cat /proc/sys/fs/suid_dumpable > seen", owner()));
    if (a.state == ActualState::kFailedToStart) ::_exit(11);
    for (int i = 0; i < 4000; ++i) {
      for (const auto& s : exec.poll()) {
        if (s.id == 3 && s.state != ActualState::kRunning)
          ::_exit(s.exitCode && *s.exitCode == 0 ? 0 : 12);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::_exit(13);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: no namespace, 11: not started, 12: failed, 13: hung";
  std::ifstream uid(nsWork + "/jobs/3/work/uid"), seen(nsWork + "/jobs/3/work/seen");
  std::string u, d;
  std::getline(uid, u);
  std::getline(seen, d);
  EXPECT_EQ(u, "4242");
  EXPECT_EQ(d, "1") << "the shim saw the host's own setting";
}

}  // namespace
}  // namespace allot::agent
