#include "agent/exec/process_executor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <thread>

#include "agent/exec/container_config.h"
#include "agent/exec/proc.h"
#include "agent/exec/tree_remover.h"

namespace allot::agent {
namespace {

namespace fs = std::filesystem;
using model::ActualJob;
using model::ActualState;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits for cond, checking every few milliseconds; false if it did not hold within timeout.
bool eventually(const std::function<bool()>& cond,
                std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

bool processGone(pid_t pid) {
  auto st = readProcStat(pid);
  return !st || st->state == 'Z';  // a zombie has finished; only its parent's wait is missing
}

JobSpec shellJob(int64_t id, const std::string& script) {
  JobSpec s;
  s.id = id;
  s.command = {"sh", "-c", script};
  return s;
}

class ProcessExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/allot-exec-test-XXXXXX";
    workDir_ = mkdtemp(tmpl);
    exec_ = makeExecutor();
  }
  void TearDown() override {
    // Leave no job behind, whatever the test did.
    if (!exec_) exec_ = makeExecutor();
    for (const auto& a : exec_->poll()) {
      if (a.state == ActualState::kRunning) exec_->stop(a.id, 0);
    }
    eventually([&] {
      for (const auto& a : exec_->poll()) {
        if (a.state == ActualState::kRunning) return false;
      }
      return true;
    });
    for (const auto& a : exec_->poll()) exec_->forget(a.id);
    exec_.reset();
    fs::remove_all(workDir_);
  }

  virtual CgroupManager* cgroups() { return nullptr; }
  std::unique_ptr<ProcessExecutor> makeExecutor() {
    return std::make_unique<ProcessExecutor>(workDir_, ALLOT_JOB_SHIM_PATH, clock_, cgroups(),
                                             standbys_, stateDir_);
  }

  std::optional<ActualJob> find(int64_t id) {
    for (const auto& a : exec_->poll()) {
      if (a.id == id) return a;
    }
    return std::nullopt;
  }
  // Polls until the job has ended; its final state.
  ActualJob waitForEnd(int64_t id) {
    std::optional<ActualJob> a;
    bool ended = eventually([&] {
      a = find(id);
      return a && a->state != ActualState::kRunning;
    });
    EXPECT_TRUE(ended) << "job " << id << " did not end";
    return a.value_or(ActualJob{});
  }
  std::string jobFile(int64_t id, const std::string& name) {
    return workDir_ + "/jobs/" + std::to_string(id) + "/" + name;
  }
  std::string workFile(int64_t id, const std::string& name) { return jobFile(id, "work/" + name); }
  bool fileHasLines(const std::string& path, int n) {
    std::string s = readFile(path);
    return std::count(s.begin(), s.end(), '\n') >= n;
  }

  // The pid of the job's shim as its directory records it.
  pid_t shimPidOf(int64_t id) {
    std::string text = readFile(jobFile(id, "shim.json"));
    size_t at = text.find("\"pid\":");
    return at == std::string::npos ? 0 : std::stoi(text.substr(at + 6));
  }

  std::string workDir_;
  std::string stateDir_;  // "" (the default): records in the work dir
  FakeClock clock_;
  int standbys_ = 1;  // standby shims makeExecutor() asks for (used only with cgroups)
  std::unique_ptr<ProcessExecutor> exec_;
};

TEST_F(ProcessExecutorTest, JobSeesItsGpusAndIdInItsEnvironment) {
  JobSpec s = shellJob(7,
                       "echo \"C=$CUDA_VISIBLE_DEVICES N=$NVIDIA_VISIBLE_DEVICES "
                       "J=$ALLOT_JOB_ID F=$FOO\"");
  s.gpuUuids = {"GPU-aaa", "GPU-bbb"};
  s.env = {{"FOO", "bar"}, {"CUDA_VISIBLE_DEVICES", "all"}};  // a job cannot widen its GPUs
  ActualJob started = exec_->start(s);
  EXPECT_NE(started.state, ActualState::kFailedToStart) << started.message;  // may have ended
  EXPECT_EQ(started.startedAt, clock_.nowMs());
  ActualJob a = waitForEnd(7);
  EXPECT_EQ(a.exitCode, 0);
  EXPECT_EQ(readFile(exec_->logPath(7)), "C=GPU-aaa,GPU-bbb N=GPU-aaa,GPU-bbb J=7 F=bar\n");
}

// The shim stays root while the job runs: none of the job's environment may reach it (an
// LD_PRELOAD there would run as root). The job reads its parent's, the shim's, environment.
TEST_F(ProcessExecutorTest, TheShimHasNoneOfTheJobsEnvironment) {
  JobSpec s = shellJob(8,
                       "echo \"mine=$MARKER\"; tr '\\0' '\\n' < /proc/$PPID/environ | "
                       "sed 's/^/shim:/'; echo done");
  s.env = {{"MARKER", "job-only"}, {"LD_LIBRARY_PATH", "/job/lib"}};
  ASSERT_NE(exec_->start(s).state, ActualState::kFailedToStart);
  EXPECT_EQ(waitForEnd(8).exitCode, 0);
  const std::string log = readFile(exec_->logPath(8));
  EXPECT_NE(log.find("mine=job-only\n"), std::string::npos) << log;
  EXPECT_NE(log.find("done\n"), std::string::npos) << log;
  EXPECT_EQ(log.find("shim:"), std::string::npos) << "the shim has an environment:\n" << log;
}

TEST_F(ProcessExecutorTest, JobGetsAScratchDirectoryOfItsOwnRemovedWhenItIsForgotten) {
  exec_->setScratchRoot(workDir_ + "/scratch-root");
  ActualJob started = exec_->start(
      shellJob(8, "echo \"S=$ALLOT_SCRATCH\"; echo x > $ALLOT_SCRATCH/f; "
                  "mkdir $ALLOT_SCRATCH/d; ln -s / $ALLOT_SCRATCH/d/root"));
  EXPECT_NE(started.state, ActualState::kFailedToStart) << started.message;
  ActualJob a = waitForEnd(8);
  EXPECT_EQ(a.exitCode, 0);
  EXPECT_EQ(readFile(exec_->logPath(8)), "S=" + workDir_ + "/scratch-root/8\n");
  EXPECT_EQ(readFile(workDir_ + "/scratch-root/8/f"), "x\n");
  exec_->forget(8);
  EXPECT_FALSE(fs::exists(workDir_ + "/scratch-root/8"));
  EXPECT_TRUE(fs::exists(workDir_ + "/scratch-root"));
  // The link the job left was removed, not followed.
  EXPECT_TRUE(fs::exists("/etc/hostname") || fs::exists("/etc/passwd"));

  // What an earlier agent left where a job's scratch goes (a file, a directory with another
  // user's files) is replaced by an empty directory.
  std::ofstream(workDir_ + "/scratch-root/9") << "not a directory\n";
  fs::create_directories(workDir_ + "/scratch-root/10/old");
  std::ofstream(workDir_ + "/scratch-root/10/old/f") << "someone else's\n";
  for (int64_t id : {9, 10}) {
    ActualJob fresh = exec_->start(shellJob(id, "ls -A $ALLOT_SCRATCH | wc -l"));
    ASSERT_NE(fresh.state, ActualState::kFailedToStart) << fresh.message;
    waitForEnd(id);
    EXPECT_EQ(readFile(exec_->logPath(id)), "0\n") << id;
  }
}

TEST_F(ProcessExecutorTest, JobWithoutGpusSeesNone) {
  exec_->start(shellJob(8, "echo \"C=[$CUDA_VISIBLE_DEVICES] N=$NVIDIA_VISIBLE_DEVICES\""));
  waitForEnd(8);
  EXPECT_EQ(readFile(exec_->logPath(8)), "C=[] N=void\n");
}

TEST_F(ProcessExecutorTest, CapturesStdoutAndStderrInOneLogAndRunsInItsWorkDir) {
  exec_->start(shellJob(1, "echo out; echo err >&2; pwd"));
  waitForEnd(1);
  std::string log = readFile(exec_->logPath(1));
  EXPECT_EQ(log, "out\nerr\n" + fs::canonical(jobFile(1, "work")).string() + "\n");
  EXPECT_EQ(exec_->logPath(1), jobFile(1, "output.log"));
}

TEST_F(ProcessExecutorTest, RecordsExitCode) {
  ActualJob started = exec_->start(shellJob(2, "exit 3"));
  ActualJob a = waitForEnd(2);
  EXPECT_EQ(a.state, ActualState::kExited);
  EXPECT_EQ(a.exitCode, 3);
  EXPECT_FALSE(a.signal.has_value());
  EXPECT_GT(a.finishedAt, 0);
  EXPECT_GT(a.pid, 0);
  EXPECT_EQ(a.pid, started.pid);
}

TEST_F(ProcessExecutorTest, MissingCommandFailsToStartWithAMessage) {
  JobSpec s;
  s.id = 3;
  s.command = {"no-such-command-xyz", "--flag"};
  ActualJob a = exec_->start(s);
  EXPECT_EQ(a.state, ActualState::kFailedToStart);
  EXPECT_EQ(a.message, "no such file 'no-such-command-xyz'");
  EXPECT_TRUE(exec_->knows(3));
  auto polled = find(3);
  ASSERT_TRUE(polled);
  EXPECT_EQ(polled->state, ActualState::kFailedToStart);
  // A restarted agent still reports it.
  exec_ = makeExecutor();
  polled = find(3);
  ASSERT_TRUE(polled);
  EXPECT_EQ(polled->state, ActualState::kFailedToStart);
  EXPECT_EQ(polled->message, "no such file 'no-such-command-xyz'");
}

TEST_F(ProcessExecutorTest, EmptyCommandFailsToStart) {
  JobSpec s;
  s.id = 4;
  ActualJob a = exec_->start(s);
  EXPECT_EQ(a.state, ActualState::kFailedToStart);
  EXPECT_EQ(a.message, "empty command");
}

TEST_F(ProcessExecutorTest, MissingShimFailsToStartNamingIt) {
  ProcessExecutor broken(workDir_, "/nonexistent/allot-job-shim", clock_, nullptr);
  ActualJob a = broken.start(shellJob(5, "true"));
  EXPECT_EQ(a.state, ActualState::kFailedToStart);
  EXPECT_NE(a.message.find("/nonexistent/allot-job-shim"), std::string::npos) << a.message;
}

TEST_F(ProcessExecutorTest, StartingAKnownJobAgainStartsNothing) {
  ActualJob first =
      exec_->start(shellJob(6, "echo once; while [ ! -e release ]; do sleep 0.01; done"));
  ActualJob again = exec_->start(shellJob(6, "echo twice"));
  EXPECT_EQ(again.state, ActualState::kRunning);
  EXPECT_EQ(again.pid, first.pid);
  std::ofstream(workFile(6, "release")).close();
  waitForEnd(6);
  EXPECT_EQ(readFile(exec_->logPath(6)), "once\n");
}

TEST_F(ProcessExecutorTest, StopKillsTheWholeTree) {
  // Records the pids of a background and a foreground sleep, then waits on both.
  exec_->start(shellJob(10,
                        "sleep 1000 & echo $! >> pids; "
                        "sh -c 'echo $$ >> pids; exec sleep 1000'; wait"));
  ASSERT_TRUE(eventually([&] { return fileHasLines(workFile(10, "pids"), 2); }));
  std::istringstream in(readFile(workFile(10, "pids")));
  pid_t bg = 0, fg = 0;
  in >> bg >> fg;
  ASSERT_FALSE(processGone(bg));
  ASSERT_FALSE(processGone(fg));

  exec_->stop(10, 60'000);
  ActualJob a = waitForEnd(10);
  EXPECT_EQ(a.state, ActualState::kExited);
  EXPECT_EQ(a.signal, SIGTERM);
  EXPECT_TRUE(eventually([&] { return processGone(bg) && processGone(fg); }));
}

TEST_F(ProcessExecutorTest, JobIgnoringSigtermIsKilledAfterTheGrace) {
  exec_->start(shellJob(11, "trap '' TERM; echo ready > ready; while :; do sleep 0.01; done"));
  ASSERT_TRUE(eventually([&] { return fs::exists(workFile(11, "ready")); }));
  exec_->stop(11, 5'000);
  // Within the grace it survives the SIGTERM (the fake clock has not moved)...
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(find(11)->state, ActualState::kRunning);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // ...and a second stop() does not shorten the grace.
  exec_->stop(11, 0);
  EXPECT_EQ(find(11)->state, ActualState::kRunning);
  clock_.advance(5'000);
  ActualJob a = waitForEnd(11);
  EXPECT_EQ(a.signal, SIGKILL);
}

TEST_F(ProcessExecutorTest, RunningJobIsReadoptedByANewExecutor) {
  ActualJob started =
      exec_->start(shellJob(20, "while [ ! -e release ]; do sleep 0.01; done; exit 4"));
  ASSERT_EQ(started.state, ActualState::kRunning);
  exec_.reset();  // the agent stops; the job does not

  exec_ = makeExecutor();
  EXPECT_TRUE(exec_->knows(20));
  auto a = find(20);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->state, ActualState::kRunning);
  EXPECT_EQ(a->pid, started.pid);
  EXPECT_EQ(a->startedAt, started.startedAt);

  std::ofstream(workFile(20, "release")).close();
  ActualJob ended = waitForEnd(20);
  EXPECT_EQ(ended.state, ActualState::kExited);
  EXPECT_EQ(ended.exitCode, 4);
}

TEST_F(ProcessExecutorTest, ReadoptedJobCanBeStopped) {
  exec_->start(shellJob(21, "sleep 1000"));
  exec_ = makeExecutor();
  exec_->stop(21, 60'000);
  ActualJob a = waitForEnd(21);
  EXPECT_EQ(a.signal, SIGTERM);
}

TEST_F(ProcessExecutorTest, JobThatEndedWhileNoExecutorRanReportsItsExitCode) {
  exec_->start(shellJob(22, "while [ ! -e release ]; do sleep 0.01; done; exit 5"));
  exec_.reset();
  std::ofstream(workFile(22, "release")).close();
  ASSERT_TRUE(eventually([&] { return fs::exists(jobFile(22, "status.json")); }));

  exec_ = makeExecutor();
  auto a = find(22);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->state, ActualState::kExited);
  EXPECT_EQ(a->exitCode, 5);
}

TEST_F(ProcessExecutorTest, JobWhoseShimDiedWhileNoExecutorRanIsLostAndKilled) {
  ActualJob started = exec_->start(shellJob(23, "sleep 1000"));
  exec_.reset();
  std::ifstream shimFile(jobFile(23, "shim.json"));
  std::string text((std::istreambuf_iterator<char>(shimFile)), {});
  pid_t shim = std::stoi(text.substr(text.find("\"pid\":") + 6));
  ASSERT_EQ(::kill(shim, SIGKILL), 0);
  ASSERT_TRUE(eventually([&] { return processGone(shim); }));

  exec_ = makeExecutor();
  auto a = find(23);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->state, ActualState::kLost);
  EXPECT_NE(a->message.find("exited without recording"), std::string::npos) << a->message;
  EXPECT_TRUE(eventually([&] { return processGone(started.pid); }));
}

// Found by a review: an outcome that could not be read for want of descriptors was taken for none,
// so a job whose shim had exited was reported lost, its exit code thrown away. It is "not now".
TEST(JobDirTest, AnOutcomeOutOfReachForNowIsNeitherNoneNorAnError) {
  char tmpl[] = "/tmp/allot-jobdir-test-XXXXXX";
  const std::string root = mkdtemp(tmpl);
  JobDir dir(root, root, 7);
  ASSERT_TRUE(dir.create().ok());
  JobOutcome ended;
  ended.state = ActualState::kExited;
  ended.exitCode = 3;
  ended.finishedAt = 1000;
  ASSERT_TRUE(dir.writeOutcome(ended).ok());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // No descriptor can be opened: the lowest free one is at the limit.
    const int lowest = ::dup(0);
    ::close(lowest);
    const rlimit none{static_cast<rlim_t>(lowest), static_cast<rlim_t>(lowest)};
    ::setrlimit(RLIMIT_NOFILE, &none);
    auto outcome = dir.readOutcome();
    _exit(!outcome.ok() && outcome.status().code() == Code::kUnavailable ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "out of descriptors: Unavailable";
  auto outcome = dir.readOutcome();
  ASSERT_TRUE(outcome.ok() && outcome->has_value());
  EXPECT_EQ((*outcome)->exitCode, 3);
  fs::remove_all(root);
}

TEST_F(ProcessExecutorTest, ForgetRemovesTheJobAndItsDirectory) {
  exec_->start(shellJob(30, "true"));
  waitForEnd(30);
  exec_->forget(30);
  EXPECT_FALSE(exec_->knows(30));
  EXPECT_FALSE(fs::exists(jobFile(30, "")));
  exec_ = makeExecutor();
  EXPECT_FALSE(exec_->knows(30));
}

// Whether dir holds a tree a TreeRemover set aside and has not finished removing.
bool holdsASetAsideTree(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind(kAsidePrefix, 0) == 0) return true;
  }
  return false;
}

// A job can leave more files than the agent's loop may take the time to remove: forget() frees
// the job's places at once, and the rest is removed in the background, through no link the job
// left.
TEST_F(ProcessExecutorTest, WhatAJobLeavesBeyondTheBudgetIsRemovedInTheBackground) {
  exec_->setScratchRoot(workDir_ + "/scratch-root");
  const std::string n = std::to_string(TreeRemover::kDefaultBudget + 100);
  ActualJob started = exec_->start(
      shellJob(30, "mkdir many && cd many && seq " + n + " | xargs touch && ln -s / root && cd " +
                       "$ALLOT_SCRATCH && seq " + n + " | xargs touch && ln -s / root"));
  ASSERT_NE(started.state, ActualState::kFailedToStart) << started.message;
  ASSERT_EQ(waitForEnd(30).exitCode, 0) << readFile(exec_->logPath(30));
  exec_->forget(30);
  EXPECT_FALSE(fs::exists(fs::symlink_status(jobFile(30, ""))));
  EXPECT_FALSE(fs::exists(fs::symlink_status(workDir_ + "/scratch-root/30")));
  // What was set aside holds no records: it reads as nobody's job (the fork server lists these).
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(workDir_ + "/jobs", ec)) {
    for (const char* record : {"spec.json", "shim.json", "pid", "status.json"})
      EXPECT_FALSE(fs::exists(e.path() / record)) << e.path() << "/" << record;
  }
  EXPECT_TRUE(eventually([&] {
    return !holdsASetAsideTree(workDir_ + "/jobs") &&
           !holdsASetAsideTree(workDir_ + "/scratch-root");
  }));
  EXPECT_TRUE(fs::exists("/etc/hostname") || fs::exists("/etc/passwd"));
}

// An agent that stopped while it removed a job's files in the background left them set aside:
// the next one removes them.
TEST_F(ProcessExecutorTest, WhatAnEarlierAgentSetAsideIsRemovedByTheNext) {
  exec_.reset();
  for (const std::string& dir : {workDir_ + "/jobs", workDir_ + "/scratch"}) {
    const fs::path aside = fs::path(dir) / (std::string(kAsidePrefix) + "77");
    fs::create_directories(aside / "d");
    std::ofstream(aside / "d" / "f") << "x";
  }
  exec_ = makeExecutor();
  EXPECT_TRUE(eventually([&] {
    return !holdsASetAsideTree(workDir_ + "/jobs") && !holdsASetAsideTree(workDir_ + "/scratch");
  }));
}

TEST_F(ProcessExecutorTest, LeftoverBackgroundProcessesDieWithTheJob) {
  ActualJob a = exec_->start(shellJob(31, "sleep 1000 & echo $! > bg"));
  ASSERT_TRUE(eventually([&] { return fileHasLines(workFile(31, "bg"), 1); }));
  pid_t bg = std::stoi(readFile(workFile(31, "bg")));
  waitForEnd(31);
  EXPECT_TRUE(eventually([&] { return processGone(bg); }));
}

// Job records on a state dir of their own (allot-agent --state-dir), data in the work dir.
// What /proc/<pid>/status says for `key` ("PPid"), without the tab; "" when there is none.
std::string statusField(pid_t pid, const std::string& key) {
  std::istringstream in(readFile("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":\t", 0) == 0) return line.substr(key.size() + 2);
  }
  return "";
}

// While it lives, this process ignores SIGPIPE and SIGUSR1 and blocks SIGUSR2, as an agent
// might: none of that may reach a job.
class SignalsAsAnAgentMightHaveThem {
 public:
  SignalsAsAnAgentMightHaveThem() {
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &oldPipe_);
    sigaction(SIGUSR1, &ignore, &oldUsr1_);
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, &oldMask_);
  }
  ~SignalsAsAnAgentMightHaveThem() {
    sigaction(SIGPIPE, &oldPipe_, nullptr);
    sigaction(SIGUSR1, &oldUsr1_, nullptr);
    pthread_sigmask(SIG_SETMASK, &oldMask_, nullptr);
  }

 private:
  struct sigaction oldPipe_, oldUsr1_;
  sigset_t oldMask_;
};

// The job's command line as the kernel shows it, NULs as spaces.
std::string commandLine(pid_t pid) {
  std::string text = readFile("/proc/" + std::to_string(pid) + "/cmdline");
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

// Shims come from the shim server (shim_server.h), yet each is the executor's own child in a
// session of its own, shows as a shim (not as the server) in ps, holds no descriptor beyond
// the job's log, its directory and its report socket, and its job starts with no signal ignored or blocked,
// whatever the agent ignores or blocks itself.
TEST_F(ProcessExecutorTest, ShimsForkedByTheServerAreTheExecutorsChildrenInSessionsOfTheirOwn) {
  const std::string script =
      "grep -E '^Sig(Ign|Blk)' /proc/self/status; ls /proc/$PPID/fd | sort -n | tr '\\n' ' ';"
      " echo; sleep 1000";
  ActualJob first, second;
  {
    SignalsAsAnAgentMightHaveThem agentLike;
    first = exec_->start(shellJob(30, script));
    second = exec_->start(shellJob(29, script));
  }
  ASSERT_NE(first.state, ActualState::kFailedToStart) << first.message;
  ASSERT_NE(second.state, ActualState::kFailedToStart) << second.message;

  const pid_t server = exec_->shimServerPid();
  ASSERT_GT(server, 0);
  EXPECT_EQ(statusField(server, "PPid"), std::to_string(getpid()));
  for (int64_t id : {30, 29}) {
    SCOPED_TRACE("job " + std::to_string(id));
    const pid_t shim = exec_->shimPidOf(id);
    ASSERT_GT(shim, 0);
    EXPECT_NE(shim, server);
    EXPECT_EQ(statusField(shim, "PPid"), std::to_string(getpid()));
    EXPECT_EQ(getsid(shim), shim);
    // Forked, not spawned: a spawned shim's argv[0] is the binary's whole path.
    EXPECT_EQ(commandLine(shim).rfind("allot-job-shim --job-fd 3 ", 0), 0u) << commandLine(shim);
    EXPECT_EQ(commandLine(server).find("--job-fd"), std::string::npos);
    ASSERT_TRUE(eventually([&] { return fileHasLines(exec_->logPath(id), 3); }));
    const std::string log = readFile(exec_->logPath(id));
    EXPECT_EQ(log.substr(0, log.find("\n", log.find("SigIgn")) + 1),
              "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
    // stdin, the log twice and the job's directory (4); until the shim has seen the exec, the
    // report socket (3) and the pipe that tells it of the exec (5) too. Nothing of the
    // server's, nor of other shims'.
    const std::string fds = log.substr(log.find("SigIgn") + 25);
    EXPECT_TRUE(fds == "0 1 2 4 \n" || fds == "0 1 2 3 4 \n" || fds == "0 1 2 3 4 5 \n") << fds;
    // The job's parent is its shim, not the server.
    EXPECT_EQ(statusField(find(id)->pid, "PPid"), std::to_string(shim));
  }
  EXPECT_EQ(commandLine(server).find("--server-fd 3"), commandLine(server).size() - 14)
      << commandLine(server);
}

TEST_F(ProcessExecutorTest, WithoutTheServerShimsAreSpawnedTheSameWay) {
  exec_->setShimServer(false);
  {
    SignalsAsAnAgentMightHaveThem agentLike;
    ASSERT_NE(exec_->start(shellJob(31, "grep -E '^Sig(Ign|Blk)' /proc/self/status")).state,
              ActualState::kFailedToStart);
  }
  EXPECT_EQ(exec_->shimServerPid(), -1);
  EXPECT_EQ(waitForEnd(31).exitCode, 0);
  EXPECT_EQ(readFile(exec_->logPath(31)),
            "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

// A server that died, or hangs, costs no job: the shim is spawned instead, the server is reaped
// (or killed and reaped), and a new one is started only after the retry interval.
TEST_F(ProcessExecutorTest, JobsStartWhenTheShimServerDiedOrHangsAndANewOneComesAfterTheRetry) {
  auto reapedSoon = [&](pid_t pid) {
    return eventually([&] {
      exec_->poll();
      return !readProcStat(pid);
    });
  };
  ASSERT_NE(exec_->start(shellJob(32, "true")).state, ActualState::kFailedToStart);
  EXPECT_EQ(waitForEnd(32).exitCode, 0);
  const pid_t dead = exec_->shimServerPid();
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::kill(dead, SIGKILL), 0);
  ASSERT_NE(exec_->start(shellJob(33, "exit 3")).state, ActualState::kFailedToStart);
  EXPECT_EQ(waitForEnd(33).exitCode, 3);
  EXPECT_EQ(exec_->shimServerPid(), -1);
  EXPECT_TRUE(reapedSoon(dead)) << "the dead server was not reaped";
  ASSERT_NE(exec_->start(shellJob(34, "exit 4")).state, ActualState::kFailedToStart);
  EXPECT_EQ(exec_->shimServerPid(), -1) << "a new server before the retry interval";
  EXPECT_EQ(waitForEnd(34).exitCode, 4);

  clock_.advance(ShimServer::kRetryMs);
  ASSERT_NE(exec_->start(shellJob(35, "exit 5")).state, ActualState::kFailedToStart);
  const pid_t stuck = exec_->shimServerPid();
  ASSERT_GT(stuck, 0);
  EXPECT_NE(stuck, dead);
  EXPECT_EQ(waitForEnd(35).exitCode, 5);
  // Stopped, it answers nothing: the next start waits kAnswerTimeoutMs, then spawns.
  ASSERT_EQ(::kill(stuck, SIGSTOP), 0);
  ASSERT_NE(exec_->start(shellJob(36, "exit 6")).state, ActualState::kFailedToStart);
  EXPECT_EQ(waitForEnd(36).exitCode, 6);
  EXPECT_EQ(exec_->shimServerPid(), -1);
  EXPECT_TRUE(reapedSoon(stuck)) << "the stuck server was not reaped";
}

// The worst case: the server forked the shim, then failed before it said so. That shim never
// gets the job (the job goes to a spawned shim, on a fresh socket pair), exits, and is reaped,
// though the executor never heard its pid. The server here is a stand-in that does just that.
TEST_F(ProcessExecutorTest, AShimForkedByAServerThatThenFailedRunsNothingAndIsReaped) {
  const std::string fake = workDir_ + "/fake-shim";
  std::ofstream(fake) << R"(#!/usr/bin/python3
import ctypes, os, socket, sys, time
REAL = ")" << ALLOT_JOB_SHIM_PATH << R"("
if sys.argv[1:2] != ["--server-fd"]:
    os.execv(REAL, [REAL] + sys.argv[1:])
server = socket.socket(fileno=3)
msg, fds, _, _ = socket.recv_fds(server, 65536, 4)
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(56, 0x8000 | 17, 0, 0, 0, 0) == 0:  # clone(CLONE_PARENT | SIGCHLD)
    os.dup2(fds[0], 3)
    os.execv(REAL, [REAL, "--job-fd", "3"])
time.sleep(60)  # never answers
)";
  fs::permissions(fake, fs::perms::owner_all);
  const std::vector<pid_t> earlier = strayShims({});  // left by earlier tests' "dead agents"
  exec_ = std::make_unique<ProcessExecutor>(workDir_, fake, clock_, nullptr, 0, stateDir_);
  ASSERT_NE(exec_->start(shellJob(37, "echo once >> ../ran")).state,
            ActualState::kFailedToStart);
  EXPECT_EQ(waitForEnd(37).exitCode, 0);
  EXPECT_EQ(readFile(jobFile(37, "ran")), "once\n");
  EXPECT_TRUE(eventually([&] {
    exec_->poll();
    return strayShims(earlier).empty();
  })) << "a shim the failed server forked was left unreaped";
}

class SplitStateExecutorTest : public ProcessExecutorTest {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/allot-exec-state-XXXXXX";
    stateDir_ = mkdtemp(tmpl);
    ProcessExecutorTest::SetUp();
  }
  void TearDown() override {
    ProcessExecutorTest::TearDown();
    fs::remove_all(stateDir_);
  }
  std::string recordFile(int64_t id, const std::string& name) {
    return stateDir_ + "/jobs/" + std::to_string(id) + "/" + name;
  }
};

TEST_F(SplitStateExecutorTest, RecordsLiveInTheStateDirAndTheLogAndWorkDirInTheWorkDir) {
  exec_->start(shellJob(40, "echo hello; touch made-here"));
  ActualJob a = waitForEnd(40);
  EXPECT_EQ(a.exitCode, 0);
  for (const char* record : {"spec.json", "shim.json", "pid", "status.json"}) {
    EXPECT_TRUE(fs::exists(recordFile(40, record))) << record;
    EXPECT_FALSE(fs::exists(jobFile(40, record))) << record;
  }
  EXPECT_EQ(readFile(jobFile(40, "output.log")), "hello\n");
  EXPECT_TRUE(fs::exists(workFile(40, "made-here")));
  EXPECT_EQ(exec_->logPath(40), jobFile(40, "output.log"));
  struct stat st {};
  ASSERT_EQ(::stat(recordFile(40, "").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);  // the job's environment is in spec.json

  exec_->forget(40);
  EXPECT_FALSE(fs::exists(recordFile(40, "")));
  EXPECT_FALSE(fs::exists(jobFile(40, "")));
}

TEST_F(SplitStateExecutorTest, RunningJobIsReadoptedFromTheStateDir) {
  ActualJob started =
      exec_->start(shellJob(41, "while [ ! -e release ]; do sleep 0.01; done; exit 6"));
  ASSERT_EQ(started.state, ActualState::kRunning);
  exec_ = makeExecutor();
  auto a = find(41);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->state, ActualState::kRunning);
  EXPECT_EQ(a->pid, started.pid);
  std::ofstream(workFile(41, "release")).close();
  EXPECT_EQ(waitForEnd(41).exitCode, 6);
}

TEST_F(SplitStateExecutorTest, JobAnAgentWithoutAStateDirRecordedInTheWorkDirIsReadoptedThere) {
  // An upgrade: the agent before ran without --state-dir.
  exec_ = std::make_unique<ProcessExecutor>(workDir_, ALLOT_JOB_SHIM_PATH, clock_, cgroups(),
                                            standbys_);
  exec_->start(shellJob(42, "while [ ! -e release ]; do sleep 0.01; done; exit 7"));
  ASSERT_TRUE(fs::exists(jobFile(42, "spec.json")));
  exec_ = makeExecutor();
  ASSERT_TRUE(exec_->knows(42));
  std::ofstream(workFile(42, "release")).close();
  EXPECT_EQ(waitForEnd(42).exitCode, 7);
  exec_->forget(42);
  EXPECT_FALSE(fs::exists(jobFile(42, "")));
}

TEST_F(SplitStateExecutorTest, DataOfJobsWithNoRecordsIsRemovedAtStart) {
  // The host restarted: the state dir (tmpfs) is empty, the work dir still has the jobs' data.
  exec_->start(shellJob(43, "sleep 1000"));
  exec_->stop(43, 0);
  waitForEnd(43);
  exec_.reset();
  fs::remove_all(stateDir_ + "/jobs");
  ASSERT_TRUE(fs::exists(jobFile(43, "output.log")));
  exec_ = makeExecutor();
  EXPECT_FALSE(exec_->knows(43));
  EXPECT_FALSE(fs::exists(jobFile(43, "")));
}

// With the host's cgroups: skipped where they are missing or not writable (not root).
TEST_F(ProcessExecutorTest, JobsStartedTogetherAllRunAndOneThatCannotStartSaysWhy) {
  JobSpec missing;
  missing.id = 9;
  missing.command = {"no-such-command-xyz"};
  auto started = exec_->startAll({shellJob(7, "sleep 1000"), missing, shellJob(8, "exit 4")});
  ASSERT_EQ(started.size(), 3u);
  EXPECT_EQ(started[0].id, 7);
  EXPECT_EQ(started[0].state, ActualState::kRunning) << started[0].message;
  EXPECT_GT(started[0].pid, 0);
  EXPECT_EQ(started[1].id, 9);
  EXPECT_EQ(started[1].state, ActualState::kFailedToStart);
  EXPECT_EQ(started[1].message, "no such file 'no-such-command-xyz'");
  EXPECT_EQ(started[2].id, 8);
  EXPECT_GT(started[2].pid, 0);
  EXPECT_NE(started[0].pid, started[2].pid);
  EXPECT_EQ(waitForEnd(8).exitCode, 4);
  // Starting them again starts nothing: their states as they are.
  auto again = exec_->startAll({shellJob(7, "echo twice"), shellJob(8, "echo twice")});
  EXPECT_EQ(again[0].pid, started[0].pid);
  EXPECT_EQ(again[0].state, ActualState::kRunning);
  EXPECT_EQ(again[1].state, ActualState::kExited);
}

class ConfinedExecutorTest : public ProcessExecutorTest {
 protected:
  void SetUp() override {
    cgroups_ = std::make_unique<CgroupManager>("allot-test");
    if (cgroups_->mode() == "none") GTEST_SKIP() << "no writable cgroup hierarchy here";
    ProcessExecutorTest::SetUp();
  }
  CgroupManager* cgroups() override { return cgroups_.get(); }

  // The directory of the job's group in the hierarchy holding `controller`, found from the
  // job's own /proc/<pid>/cgroup: proof the process is in it.
  std::string groupOf(pid_t pid, const std::string& controller) {
    std::istringstream in(readFile("/proc/" + std::to_string(pid) + "/cgroup"));
    std::string line;
    while (std::getline(in, line)) {
      size_t a = line.find(':'), b = line.find(':', a + 1);
      std::string ctrls = "," + line.substr(a + 1, b - a - 1) + ",";
      std::string path = line.substr(b + 1);
      if (cgroups_->mode() == "v2" && ctrls == ",,") return "/sys/fs/cgroup" + path;
      if (cgroups_->mode() == "v1" && ctrls.find("," + controller + ",") != std::string::npos) {
        return "/sys/fs/cgroup/" + controller + path;
      }
    }
    return "";
  }

  // Polls until the executor has a standby shim that has joined its groups; that standby.
  ProcessExecutor::StandbyInfo readyStandby() {
    std::optional<ProcessExecutor::StandbyInfo> ready;
    bool found = eventually([&] {
      exec_->poll();
      for (const auto& s : exec_->standbys()) {
        if (s.ready) ready = s;
      }
      return ready.has_value();
    });
    EXPECT_TRUE(found) << "no standby shim became ready";
    return ready.value_or(ProcessExecutor::StandbyInfo{});
  }
  static bool holds(const std::vector<std::string>& groups, const std::string& group) {
    return std::find(groups.begin(), groups.end(), group) != groups.end();
  }
  // The group is kept for the next job (v1), empty.
  bool kept(const std::string& group) const {
    for (const auto& groups : cgroups_->recycled()) {
      if (holds(groups, group)) return CgroupManager::pids({group}).empty();
    }
    return false;
  }
  void expectLimits(pid_t pid, const std::string& mem) {
    if (cgroups_->mode() == "v1") {
      EXPECT_EQ(readFile(mem + "/memory.limit_in_bytes"), "67108864\n");
      EXPECT_EQ(readFile(groupOf(pid, "cpu") + "/cpu.cfs_quota_us"), "50000\n");
    } else {
      EXPECT_EQ(readFile(mem + "/memory.max"), "67108864\n");
      EXPECT_EQ(readFile(mem + "/cpu.max"), "50000 100000\n");
    }
  }

  std::unique_ptr<CgroupManager> cgroups_;
};

TEST_F(ConfinedExecutorTest, MemoryAndCpuLimitsLandInTheJobsGroup) {
  // The direct path: no standby, so the job gets job-<id> groups of its own.
  standbys_ = 0;
  exec_ = makeExecutor();
  JobSpec s = shellJob(40, "sleep 1000");
  s.memoryLimitMib = 64;
  s.cpuMillis = 500;
  ActualJob a = exec_->start(s);
  ASSERT_EQ(a.state, ActualState::kRunning) << a.message;
  std::string mem = groupOf(a.pid, "memory");
  ASSERT_NE(mem.find("/allot-test/job-40"), std::string::npos) << mem;
  expectLimits(a.pid, mem);
  exec_->stop(40, 0);
  waitForEnd(40);
  exec_->forget(40);
  EXPECT_TRUE(eventually([&] {
    exec_->poll();  // retries removing groups that were still emptying
    return !fs::exists(mem) || kept(mem);
  }));
}

TEST_F(ConfinedExecutorTest, JobStartsOnAReadyStandbyInItsGroupsWithTheJobsLimits) {
  ProcessExecutor::StandbyInfo standby = readyStandby();
  ASSERT_GT(standby.pid, 0);
  JobSpec s = shellJob(45, "sleep 1000");
  s.memoryLimitMib = 64;
  s.cpuMillis = 500;
  ActualJob a = exec_->start(s);
  ASSERT_EQ(a.state, ActualState::kRunning) << a.message;
  EXPECT_EQ(shimPidOf(45), standby.pid);  // the standby became the job's shim
  std::string mem = groupOf(a.pid, "memory");
  EXPECT_NE(mem.find("/allot-test/slot-"), std::string::npos) << mem;
  EXPECT_TRUE(holds(standby.cgroups, mem)) << mem;
  expectLimits(a.pid, mem);
  exec_->stop(45, 30'000);  // a long grace: the SIGTERM, not a SIGKILL race, ends it
  EXPECT_EQ(waitForEnd(45).signal, SIGTERM);
  exec_->forget(45);
  EXPECT_TRUE(eventually([&] {
    exec_->poll();
    return !fs::exists(mem) || kept(mem);
  }));
}

// On v1 a job's emptied groups go to the next job (CgroupManager::recycle), with that job's limits
// and none of the last one's.
TEST_F(ConfinedExecutorTest, TheNextJobTakesTheGroupsAnEndedJobLeft) {
  if (cgroups_->mode() != "v1") GTEST_SKIP() << "groups are recycled on cgroup v1 only";
  standbys_ = 0;
  exec_ = makeExecutor();
  JobSpec first = shellJob(53, "true");
  first.memoryLimitMib = 32;
  first.cpuMillis = 500;
  ASSERT_NE(exec_->start(first).state, ActualState::kFailedToStart);
  EXPECT_EQ(waitForEnd(53).exitCode, 0);
  const std::vector<std::string> groups = exec_->cgroupsOf(53);
  ASSERT_FALSE(groups.empty());
  const pid_t shim = shimPidOf(53);
  ASSERT_GT(shim, 0);
  // Its shim has gone too, reaped by poll(): the groups are empty and nothing can join them.
  ASSERT_TRUE(eventually([&] {
    exec_->poll();
    return CgroupManager::pids(groups).empty() && !fs::exists("/proc/" + std::to_string(shim));
  }));
  exec_->forget(53);
  ASSERT_EQ(cgroups_->recycled().size(), 1u);
  const std::vector<std::string> slot = cgroups_->recycled().front();

  ActualJob b = exec_->start(shellJob(54, "sleep 1000"));  // no limits of its own
  ASSERT_EQ(b.state, ActualState::kRunning) << b.message;
  EXPECT_EQ(exec_->cgroupsOf(54), slot);
  const std::string mem = groupOf(b.pid, "memory");
  EXPECT_TRUE(holds(slot, mem)) << mem;
  EXPECT_EQ(readFile(groupOf(b.pid, "cpu") + "/cpu.cfs_quota_us"), "-1\n");
  EXPECT_NE(readFile(mem + "/memory.limit_in_bytes"), "33554432\n");
  exec_->stop(54, 0);
  waitForEnd(54);
}

// A job forgotten while it runs leaves nothing in its groups: everything there is killed, what
// forks meanwhile and its shim included (here stopped, so that it could not exit by itself). A
// review found one pass of kills, which a job forking in a loop outlived, refilling the
// directories forget() then removed without end. Its groups are kept for another job only once
// nothing of this one's is left to join them.
TEST_F(ConfinedExecutorTest, AJobForgottenWhileRunningLeavesNoProcessInItsGroups) {
  standbys_ = 0;
  exec_ = makeExecutor();
  ActualJob a = exec_->start(shellJob(55, "while :; do sleep 1000 & sleep 0.01; done"));
  ASSERT_EQ(a.state, ActualState::kRunning) << a.message;
  const std::vector<std::string> groups = exec_->cgroupsOf(55);
  const pid_t shim = shimPidOf(55);
  ASSERT_GT(shim, 0);
  ASSERT_EQ(::kill(shim, SIGSTOP), 0);
  exec_->forget(55);
  // Killed, each gone once it has run its exit: soon, but not always before forget() returns.
  EXPECT_TRUE(eventually([&] { return CgroupManager::pids(groups).empty(); }))
      << "a process of the job's outlived forget()";
  EXPECT_TRUE(eventually([&] {
    exec_->poll();
    return ::kill(shim, 0) != 0;
  })) << "the shim is killed and reaped";
  for (const auto& kept : cgroups_->recycled()) {
    EXPECT_TRUE(CgroupManager::pids(kept).empty());
  }
}

TEST_F(ConfinedExecutorTest, UsedStandbyIsReplacedAndTheNextJobStartsOnTheNewOne) {
  ProcessExecutor::StandbyInfo first = readyStandby();
  ActualJob a = exec_->start(shellJob(46, "sleep 1000"));
  ASSERT_EQ(a.state, ActualState::kRunning) << a.message;
  EXPECT_TRUE(holds(first.cgroups, groupOf(a.pid, "memory")));

  ProcessExecutor::StandbyInfo second = readyStandby();
  EXPECT_NE(second.pid, first.pid);
  EXPECT_NE(second.cgroups, first.cgroups);
  EXPECT_EQ(exec_->standbys().size(), 1u);  // one standby, as asked
  ActualJob b = exec_->start(shellJob(47, "sleep 1000"));
  ASSERT_EQ(b.state, ActualState::kRunning) << b.message;
  EXPECT_EQ(shimPidOf(47), second.pid);
  EXPECT_TRUE(holds(second.cgroups, groupOf(b.pid, "memory")));
}

TEST_F(ConfinedExecutorTest, JobsStartedTogetherTakeTheStandbyAndShimsOfTheirOwn) {
  ProcessExecutor::StandbyInfo standby = readyStandby();
  auto started = exec_->startAll(
      {shellJob(48, "sleep 1000"), shellJob(49, "sleep 1000"), shellJob(50, "sleep 1000")});
  ASSERT_EQ(started.size(), 3u);
  for (const auto& a : started) ASSERT_EQ(a.state, ActualState::kRunning) << a.message;
  EXPECT_EQ(shimPidOf(48), standby.pid);
  EXPECT_TRUE(holds(standby.cgroups, groupOf(started[0].pid, "memory")));
  // The others in groups of their own, with the job's limits like any job's.
  EXPECT_NE(groupOf(started[1].pid, "memory").find("job-49"), std::string::npos);
  EXPECT_NE(groupOf(started[2].pid, "memory").find("job-50"), std::string::npos);
}

TEST_F(ConfinedExecutorTest, StandbyRunsTheJobWithItsEnvironmentLogAndWorkDir) {
  standbys_ = 2;
  exec_ = makeExecutor();
  readyStandby();
  JobSpec s =
      shellJob(50, "echo \"J=$ALLOT_JOB_ID F=$FOO C=$CUDA_VISIBLE_DEVICES P=$PATH\"; pwd >&2");
  s.env = {{"FOO", "a b"}};
  s.gpuUuids = {"GPU-aaa"};
  ActualJob a = exec_->start(s);
  ASSERT_NE(a.state, ActualState::kFailedToStart) << a.message;
  EXPECT_EQ(waitForEnd(50).exitCode, 0);
  EXPECT_EQ(
      readFile(exec_->logPath(50)),
      "J=50 F=a b C=GPU-aaa P=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n" +
          fs::canonical(jobFile(50, "work")).string() + "\n");
  EXPECT_TRUE(eventually([&] {
    exec_->poll();
    auto all = exec_->standbys();
    return all.size() == 2 && all[0].ready && all[1].ready;
  }));
}

// The shim server holds the groups' directories open (shims join relative to them), but neither
// a shim, once joined, nor its job holds any, on the standby path or the direct one.
TEST_F(ConfinedExecutorTest, NoShimOrJobHoldsTheServersCgroupDirectories) {
  const std::string script =
      "for f in /proc/$PPID/fd/* /proc/self/fd/*; do readlink $f; done | grep -c /sys/fs/cgroup;"
      " true";
  readyStandby();
  ASSERT_NE(exec_->start(shellJob(51, script)).state, ActualState::kFailedToStart);
  ASSERT_NE(exec_->start(shellJob(52, script)).state, ActualState::kFailedToStart);  // direct
  for (int64_t id : {51, 52}) {
    SCOPED_TRACE("job " + std::to_string(id));
    EXPECT_EQ(waitForEnd(id).exitCode, 0);
    EXPECT_EQ(readFile(exec_->logPath(id)), "0\n");
  }
  int held = 0;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(exec_->shimServerPid()) +
                                              "/fd")) {
    std::error_code ec;
    held += fs::read_symlink(e.path(), ec).string().rfind("/sys/fs/cgroup", 0) == 0 ? 1 : 0;
  }
  EXPECT_EQ(held, static_cast<int>(cgroups_->bases().size()));
}

TEST_F(ConfinedExecutorTest, MissingCommandOnAStandbyFailsToStartWithAMessage) {
  ProcessExecutor::StandbyInfo standby = readyStandby();
  JobSpec s;
  s.id = 49;
  s.command = {"no-such-command-xyz"};
  ActualJob a = exec_->start(s);
  EXPECT_EQ(shimPidOf(49), standby.pid);
  EXPECT_EQ(a.state, ActualState::kFailedToStart);
  EXPECT_EQ(a.message, "no such file 'no-such-command-xyz'");
}

TEST_F(ConfinedExecutorTest, JobStartedOnAStandbyIsReadoptedKeepsItsGroupsAndIsStoppedWhole) {
  readyStandby();
  // setsid takes the sleep out of the job's process group; only the cgroup still holds it.
  ActualJob started = exec_->start(shellJob(48,
                                            "setsid sh -c 'echo $$ > escaped; exec sleep 1000' & "
                                            "while :; do sleep 0.01; done"));
  ASSERT_EQ(started.state, ActualState::kRunning) << started.message;
  ASSERT_TRUE(eventually([&] { return fileHasLines(workFile(48, "escaped"), 1); }));
  pid_t escaped = std::stoi(readFile(workFile(48, "escaped")));
  std::string mem = groupOf(escaped, "memory");
  ASSERT_NE(mem.find("/allot-test/slot-"), std::string::npos) << mem;

  exec_ = makeExecutor();  // the agent restarts: slot groups a job holds are not stray
  EXPECT_EQ(find(48)->state, ActualState::kRunning);
  EXPECT_FALSE(processGone(escaped));
  EXPECT_EQ(groupOf(escaped, "memory"), mem);

  exec_->stop(48, 30'000);  // a long grace: the SIGTERM, not a SIGKILL race, ends it
  EXPECT_EQ(waitForEnd(48).signal, SIGTERM);
  // The escapee goes at the first poll after the shim is gone, which may be after the poll that
  // saw the job end (a loaded machine: CI's failure at 2026-12-05 20:33): keep polling, as the
  // agent's loop does.
  EXPECT_TRUE(eventually([&] {
    exec_->poll();
    return processGone(escaped);
  }));
}

// Attack: an escapee (setsid) that forks and lets its parent exit, over and over, so that a kill
// of the pids read once from cgroup.procs misses its newest child. The executor swept an ended
// job's groups once, and the hopper lived on, on the job's GPUs, after the job had ended.
TEST_F(ConfinedExecutorTest, AnEscapeeThatForksInALoopDoesNotOutliveItsJob) {
  const std::string hopper =
      "import os, time\n"
      "while True:\n"
      "    if os.fork(): os._exit(0)\n"
      "    time.sleep(0.001)\n";
  ActualJob started =
      exec_->start(shellJob(51, "echo $$ > main; setsid python3 -c '" + hopper + "' & sleep 2"));
  ASSERT_EQ(started.state, ActualState::kRunning) << started.message;
  ASSERT_TRUE(eventually([&] { return fileHasLines(workFile(51, "main"), 1); }));
  const std::string group = groupOf(std::stoi(readFile(workFile(51, "main"))), "memory");
  ASSERT_FALSE(group.empty());
  EXPECT_EQ(waitForEnd(51).exitCode, 0);
  const bool emptied = eventually([&] {
    exec_->poll();
    return CgroupManager::pids({group}).empty();
  });
  // Whatever happened, nothing of the test is left running.
  for (int i = 0; i < 100 && !CgroupManager::killAll({group}); ++i) {
  }
  EXPECT_TRUE(emptied) << CgroupManager::pids({group}).size() << " left in " << group;
}

TEST_F(ConfinedExecutorTest, RestartedExecutorRemovesTheStandbyOfAnAgentThatDied) {
  exec_.reset();
  // An agent in a child process makes a standby, then dies without cleaning up.
  int info[2];
  ASSERT_EQ(::pipe(info), 0);
  pid_t agent = ::fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    ::close(info[0]);
    ProcessExecutor doomed(workDir_, ALLOT_JOB_SHIM_PATH, clock_, cgroups_.get());
    for (int i = 0; i < 4000; ++i) {
      doomed.poll();
      auto all = doomed.standbys();
      if (!all.empty() && all[0].ready) {
        std::string out = std::to_string(all[0].pid) + "\n";
        for (const auto& g : all[0].cgroups) out += g + "\n";
        (void)!::write(info[1], out.data(), out.size());
        break;
      }
      ::usleep(5'000);
    }
    ::_exit(0);  // no destructor runs: as if killed
  }
  ::close(info[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(info[0], buf, sizeof buf)) > 0;) text.append(buf, n);
  ::close(info[0]);
  int status;
  ASSERT_EQ(::waitpid(agent, &status, 0), agent);
  std::istringstream in(text);
  pid_t stale = 0;
  ASSERT_TRUE(in >> stale) << "the dying agent made no standby";
  std::vector<std::string> staleGroups;
  for (std::string g; in >> g;) staleGroups.push_back(g);
  ASSERT_FALSE(staleGroups.empty());
  for (const auto& g : staleGroups) ASSERT_TRUE(fs::exists(g)) << g;

  // Without standbys of its own, which could be given the freed slot's name again.
  standbys_ = 0;
  exec_ = makeExecutor();
  EXPECT_TRUE(eventually([&] {
    exec_->poll();  // retries removing groups whose process was still exiting
    return std::none_of(staleGroups.begin(), staleGroups.end(),
                        [](const std::string& g) { return fs::exists(g); });
  }));
  EXPECT_TRUE(eventually([&] { return processGone(stale); }));
}

TEST_F(ConfinedExecutorTest, StopKillsProcessesThatLeftTheProcessGroup) {
  // setsid takes the sleep out of the job's process group; only the cgroup still holds it.
  exec_->start(shellJob(41,
                        "setsid sh -c 'echo $$ > escaped; exec sleep 1000' & "
                        "while :; do sleep 0.01; done"));
  ASSERT_TRUE(eventually([&] { return fileHasLines(workFile(41, "escaped"), 1); }));
  pid_t escaped = std::stoi(readFile(workFile(41, "escaped")));
  exec_->stop(41, 0);
  waitForEnd(41);
  EXPECT_TRUE(eventually([&] { return processGone(escaped); }));
}

TEST_F(ConfinedExecutorTest, RestartedExecutorRemovesGroupsOfJobsItDoesNotKnow) {
  JobSpec stray;
  stray.id = 43;
  auto groups = cgroups_->create(stray);
  ASSERT_TRUE(groups.ok()) << groups.status().toString();
  ASSERT_FALSE(groups->empty());
  exec_->start(shellJob(44, "sleep 1000"));
  exec_ = makeExecutor();
  for (const auto& g : *groups) EXPECT_FALSE(fs::exists(g)) << g;
  EXPECT_EQ(find(44)->state, ActualState::kRunning);  // a job it knows keeps its groups
}

TEST_F(ConfinedExecutorTest, JobMayOpenOnlyItsOwnGpuDevices) {
  if (cgroups_->mode() != "v1") GTEST_SKIP() << "device rules need cgroup v1 here";
  // Device nodes for GPUs 0 and 1. No NVIDIA driver is loaded, so opening an allowed one fails
  // with ENXIO ("No such device or address") and a denied one with EPERM.
  std::string devs = workDir_ + "/dev";
  fs::create_directories(devs);
  for (int minor : {0, 1}) {
    std::string node = devs + "/nvidia" + std::to_string(minor);
    if (::mknod(node.c_str(), S_IFCHR | 0666, makedev(195, minor)) != 0) {
      GTEST_SKIP() << "cannot create device nodes here";
    }
  }
  JobSpec s = shellJob(42, "cat " + devs + "/nvidia0; cat " + devs + "/nvidia1; true");
  s.realGpus = true;
  s.gpuMinors = {0};
  s.gpuUuids = {"GPU-0"};
  ActualJob started = exec_->start(s);
  ASSERT_NE(started.state, ActualState::kFailedToStart) << started.message;
  waitForEnd(42);
  std::string log = readFile(exec_->logPath(42));
  EXPECT_NE(log.find("nvidia0: No such device or address"), std::string::npos) << log;
  EXPECT_NE(log.find("nvidia1: Operation not permitted"), std::string::npos) << log;
}

// Jobs in an image (docs/environments.md): crun runs them on an overlay of layers. The layer here
// is made by hand from busybox, as the image store would have unpacked it.
class ImageExecutorTest : public ConfinedExecutorTest {
 protected:
  void SetUp() override {
    ConfinedExecutorTest::SetUp();
    if (IsSkipped()) return;
    layers_ = workDir_ + "/layers";
    const std::string base = layers_ + "/" + std::string(64, 'a');
    fs::create_directories(base + "/bin");
    fs::create_directories(base + "/etc");
    fs::copy_file("/bin/busybox", base + "/bin/busybox");
    for (const char* tool : {"sh", "cat", "ls", "echo", "sleep", "test", "id"})
      fs::create_symlink("busybox", base + "/bin/" + tool);
    std::ofstream(base + "/etc/allot-image") << "from the image\n";
    // The filter the agent gives containers (containers-common's profile, as podman does).
    seccomp_ = hostContainerSeccomp();
    ASSERT_FALSE(seccomp_.empty()) << "no " << kContainerSeccompProfile << " (containers-common)";
    exec_->setSeccomp(seccomp_);
  }
  std::string seccomp_;
  JobSpec imageJob(int64_t id, const std::string& script) {
    JobSpec s = shellJob(id, script);
    s.command = {"/bin/sh", "-c", script};
    ContainerImage image;
    image.ref = "registry.test/base:1";
    image.digest = "sha256:" + std::string(64, 'b');
    image.layersRoot = layers_;
    image.layers = {std::string(64, 'a')};
    image.env = {"PATH=/bin", "FROM_IMAGE=yes"};
    s.image = image;
    return s;
  }
  std::string layers_;
};

TEST_F(ImageExecutorTest, AJobInAnImageSeesTheImagesFilesNotTheHostsWithItsExitCodeAndLog) {
  JobSpec s = imageJob(50,
                       "cat /etc/allot-image; test -e /usr/bin/apt-get || echo no-host-apt; "
                       "echo job=$ALLOT_JOB_ID image=$FROM_IMAGE; echo x > /etc/new; "
                       "echo kept > $ALLOT_SCRATCH/out; exit 3");
  s.env["ALLOT_JOB_ID"] = "forged";  // Allot's own variables win over the job's
  ActualJob started = exec_->start(s);
  ASSERT_EQ(started.state, ActualState::kRunning) << started.message;
  ActualJob ended = waitForEnd(50);
  EXPECT_EQ(ended.exitCode, 3) << readFile(exec_->logPath(50));
  EXPECT_EQ(readFile(exec_->logPath(50)), "from the image\nno-host-apt\njob=50 image=yes\n");
  // The job's writes land in its own upper directory, never in the shared layer.
  EXPECT_FALSE(fs::exists(layers_ + "/" + std::string(64, 'a') + "/etc/new"));
  EXPECT_TRUE(fs::exists(jobFile(50, "overlay/upper/etc/new")));
  // What the container wrote is root's alone on the host, its config (its environment) too.
  for (const char* dir : {"overlay", "bundle"}) {
    struct stat st {};
    ASSERT_EQ(::stat(jobFile(50, dir).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
  }
  EXPECT_EQ(readFile(workDir_ + "/scratch/50/out"), "kept\n");
  // Nothing of the overlay is left mounted in the host's namespace.
  EXPECT_EQ(readFile("/proc/self/mounts").find(jobFile(50, "bundle")), std::string::npos);
}

TEST_F(ImageExecutorTest, AContainerRunsWithNoCapabilitiesAndNoNewPrivileges) {
  exec_->start(imageJob(51, "cat /proc/self/status"));
  waitForEnd(51);
  const std::string status = readFile(exec_->logPath(51));
  EXPECT_NE(status.find("CapEff:\t0000000000000000"), std::string::npos) << status;
  EXPECT_NE(status.find("CapBnd:\t0000000000000000"), std::string::npos) << status;
  EXPECT_NE(status.find("NoNewPrivs:\t1"), std::string::npos) << status;
  EXPECT_NE(status.find("Seccomp:\t2"), std::string::npos) << status;  // a filter, in force
}

TEST_F(ImageExecutorTest, WithoutASeccompFilterAJobInAnImageIsRefused) {
  exec_->setSeccomp("");
  ActualJob a = exec_->start(imageJob(57, "true"));
  EXPECT_EQ(a.state, ActualState::kFailedToStart);
  EXPECT_NE(a.message.find("seccomp"), std::string::npos) << a.message;
}

TEST_F(ImageExecutorTest, AStoppedContainerEndsWhole) {
  exec_->start(imageJob(52, "sleep 1000 & sleep 1000"));
  exec_->stop(52, 100);
  // The grace passes, as it does for the agent. A SIGTERM that reaches the container while its
  // shell is still starting is ignored (it is the pid namespace's init, which only takes signals
  // it handles, as in any container), so the SIGKILL after the grace is what ends it then: 1 to
  // 5 runs in 60 here, which waited for ever while the fake clock stood still.
  clock_.advance(100);
  ActualJob ended = waitForEnd(52);
  EXPECT_EQ(ended.state, ActualState::kExited);
  EXPECT_TRUE(eventually([&] { return CgroupManager::pids(exec_->cgroupsOf(52)).empty(); }));
}

TEST_F(ImageExecutorTest, AnImageWithNoCommandAndAJobWithNoneFailsToStartSayingSo) {
  JobSpec s = imageJob(53, "");
  s.command.clear();
  ActualJob a = exec_->start(s);
  EXPECT_EQ(a.state, ActualState::kFailedToStart);
  EXPECT_NE(a.message.find("names no command"), std::string::npos) << a.message;
}

TEST_F(ImageExecutorTest, AJobWithRealGpusGetsTheHostsDriverFilesReadOnly) {
  // Stand-ins for the driver's library and tool (a GPU host's come from ldconfig -p).
  const std::string driver = workDir_ + "/driver";
  fs::create_directories(driver);
  std::ofstream(driver + "/libcuda.so.1") << "the host's driver\n";
  std::ofstream(driver + "/nvidia-smi") << "#!/bin/sh\necho GPU 0: simulated\n";
  fs::permissions(driver + "/nvidia-smi",
                  fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  exec_->setDriverFiles({{driver + "/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"},
                         {driver + "/nvidia-smi", "/usr/local/nvidia/bin/nvidia-smi"}});
  JobSpec s = imageJob(55,
                       "cat /usr/local/nvidia/lib64/libcuda.so.1; nvidia-smi; "
                       "echo LD=$LD_LIBRARY_PATH; "
                       "echo tampered > /usr/local/nvidia/lib64/libcuda.so.1 || echo ro");
  s.realGpus = true;
  ActualJob started = exec_->start(s);
  ASSERT_NE(started.state, ActualState::kFailedToStart) << started.message;
  waitForEnd(55);
  std::string log = readFile(exec_->logPath(55));
  EXPECT_NE(log.find("the host's driver\nGPU 0: simulated\nLD=/usr/local/nvidia/lib64\n"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("ro\n"), std::string::npos) << log;
  EXPECT_EQ(readFile(driver + "/libcuda.so.1"), "the host's driver\n");
  // A job without real GPUs gets none of it.
  exec_->start(imageJob(56, "test -e /usr/local/nvidia/lib64/libcuda.so.1 || echo none"));
  waitForEnd(56);
  EXPECT_EQ(readFile(exec_->logPath(56)), "none\n");
}

TEST_F(ImageExecutorTest, AJobInAnImageOpensItsOwnGpuNodeOnly) {
  if (cgroups_->mode() != "v1") GTEST_SKIP() << "device rules need cgroup v1 here";
  std::string devs = workDir_ + "/dev";
  fs::create_directories(devs);
  for (int minor : {0, 1}) {
    std::string node = devs + "/nvidia" + std::to_string(minor);
    ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(195, minor)), 0);
  }
  JobSpec s = imageJob(54, "cat /dev/nvidia0; cat /dev/nvidia1; true");
  s.image->hostDevDir = devs;
  s.realGpus = true;
  s.gpuMinors = {0};
  s.gpuUuids = {"GPU-0"};
  ActualJob started = exec_->start(s);
  ASSERT_NE(started.state, ActualState::kFailedToStart) << started.message;
  waitForEnd(54);
  std::string log = readFile(exec_->logPath(54));
  // Its own: the device rules let it through to the driver (none here); another GPU's node is
  // not in the container at all.
  EXPECT_NE(log.find("/dev/nvidia0': No such device or address"), std::string::npos) << log;
  EXPECT_NE(log.find("/dev/nvidia1': No such file or directory"), std::string::npos) << log;
}

}  // namespace
}  // namespace allot::agent
