// The shim server's side of the protocol (job_shim_main.cc), driven by hand: what it does with
// requests the agent would never send.
#include "agent/exec/shim_server.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/fd_passing.h"

namespace allot::agent {
namespace {

class ShimServerProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override { startServer({}); }
  void TearDown() override { stopServer(); }

  // A server with `more` arguments after --server-fd 3.
  void startServer(const std::vector<std::string>& more) {
    int ends[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends), 0);
    std::vector<std::string> argv = {ALLOT_JOB_SHIM_PATH, "--server-fd", "3"};
    argv.insert(argv.end(), more.begin(), more.end());
    auto pid = spawnShimProcess(argv, ends[1], 3);
    ::close(ends[1]);
    ASSERT_TRUE(pid.ok()) << pid.status().message();
    server_ = *pid;
    socket_ = ends[0];
  }
  void stopServer() {
    if (socket_ >= 0) ::close(socket_);
    socket_ = -1;
    if (server_ > 0) {
      ::kill(server_, SIGKILL);
      waitpid(server_, nullptr, 0);
    }
    server_ = -1;
  }

  // Asks for a standby in `group`; its pid once it has joined (written 'R'), with *agentEnd its
  // socket; -1 when it did not.
  pid_t readyStandby(const std::string& group, int* agentEnd) {
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return -1;
    const std::string payload =
        std::string("--standby-fd\0" "3\0" "--cgroup\0", 24) + group + '\0';
    const int32_t pid = request(payload, {ends[1]});
    ::close(ends[1]);
    *agentEnd = ends[0];
    pollfd p{ends[0], POLLIN, 0};
    char ready = 0;
    if (pid <= 0 || ::poll(&p, 1, 5000) != 1 || ::read(ends[0], &ready, 1) != 1 || ready != 'R')
      return -1;
    return pid;
  }

  // Sends payload with fds; the server's answer, or INT32_MIN when none came within 5 s.
  int32_t request(const std::string& payload, const std::vector<int>& fds) {
    if (sendWithDescriptors(socket_, payload, fds, MSG_NOSIGNAL) < 0) return INT32_MIN;
    pollfd p{socket_, POLLIN, 0};
    int32_t answer;
    if (::poll(&p, 1, 5000) != 1 || ::recv(socket_, &answer, sizeof answer, 0) != sizeof answer)
      return INT32_MIN;
    return answer;
  }

  // A pipe whose write end goes to the server; true once nobody but the server held it and the
  // server closed its copy too (the read end sees end-of-file).
  static bool closedEverywhere(int readEnd) {
    pollfd p{readEnd, POLLIN, 0};
    char c;
    return ::poll(&p, 1, 5000) == 1 && ::read(readEnd, &c, 1) == 0;
  }

  // The exit status of our child pid, waiting up to 5 s; -1 if it did not exit.
  static int exitStatusOf(pid_t pid) {
    for (int i = 0; i < 500; ++i) {
      int status;
      const pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (r < 0) return -1;
      ::usleep(10'000);
    }
    return -1;
  }

  pid_t server_ = -1;
  int socket_ = -1;
};

const std::string kJobFdRequest = std::string("--job-fd\0" "3\0", 11);

TEST_F(ShimServerProtocolTest, AForkedShimIsOurChildAndExitsWhenNoJobComes) {
  int ends[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  const int32_t pid = request(kJobFdRequest, {ends[1]});
  ::close(ends[1]);
  ASSERT_GT(pid, 0);
  EXPECT_NE(pid, server_);
  // It takes a session of its own first thing (not before the server answered).
  for (int i = 0; i < 500 && getsid(pid) != pid; ++i) ::usleep(10'000);
  EXPECT_EQ(getsid(pid), pid);
  ::close(ends[0]);  // end-of-file before any job: it runs nothing
  EXPECT_EQ(exitStatusOf(pid), 2);  // reaped here: CLONE_PARENT made it ours
}

TEST_F(ShimServerProtocolTest, RequestsWithoutExactlyOneDescriptorAreRefusedAndTheServerGoesOn) {
  EXPECT_EQ(request(kJobFdRequest, {}), -EINVAL);

  int a[2], b[2];
  ASSERT_EQ(::pipe2(a, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(b, O_CLOEXEC), 0);
  EXPECT_EQ(request(kJobFdRequest, {a[1], b[1]}), -EINVAL);
  ::close(a[1]);
  ::close(b[1]);
  EXPECT_TRUE(closedEverywhere(a[0])) << "the server kept a descriptor it refused";
  EXPECT_TRUE(closedEverywhere(b[0]));

  // More than its buffer takes: truncated, refused, and none of them kept.
  std::vector<int> readEnds, writeEnds;
  for (int i = 0; i < 16; ++i) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    readEnds.push_back(p[0]);
    writeEnds.push_back(p[1]);
  }
  EXPECT_EQ(request(kJobFdRequest, writeEnds), -EINVAL);
  for (int fd : writeEnds) ::close(fd);
  for (int fd : readEnds) {
    EXPECT_TRUE(closedEverywhere(fd));
    ::close(fd);
  }
  ::close(a[0]);
  ::close(b[0]);

  // Still serving.
  int ends[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  const int32_t pid = request(kJobFdRequest, {ends[1]});
  ::close(ends[1]);
  ::close(ends[0]);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(exitStatusOf(pid), 2);
}

TEST_F(ShimServerProtocolTest, APayloadNotEndingInNulOrLongerThanItTakesIsRefused) {
  for (const std::string& payload :
       {std::string("--job-fd"), kJobFdRequest + std::string(70'000, 'x') + '\0'}) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    EXPECT_EQ(request(payload, {p[1]}), -EINVAL);
    ::close(p[1]);
    EXPECT_TRUE(closedEverywhere(p[0]));
    ::close(p[0]);
  }
}

std::string procText(pid_t pid, const char* file) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + file);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// What the executor looks for after a server failed: children that are shims it does not know.
TEST(StrayShimsTest, ListsOurShimChildrenThatAreNotKnownAliveOrExited) {
  // Shims earlier tests in this process left to exit on their own (an agent that "died") are
  // known here.
  const std::vector<pid_t> earlier = strayShims({});
  auto with = [&](std::vector<pid_t> more) {
    more.insert(more.end(), earlier.begin(), earlier.end());
    return more;
  };
  int ends[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  auto shim = spawnShimProcess({ALLOT_JOB_SHIM_PATH, "--job-fd", "3"}, ends[1], 3);
  ::close(ends[1]);
  ASSERT_TRUE(shim.ok());
  const int devNull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto other = spawnShimProcess({"/bin/sleep", "30"}, devNull, 3);  // a child, but no shim
  ::close(devNull);
  ASSERT_TRUE(other.ok());
  // posix_spawn returns once the child has left our memory, which the kernel's exec does before
  // it sets the new command name: until then the shim is listed under ours. The executor looks
  // again at every poll while a failed server may have left one (mayHaveLeftAShim).
  for (int i = 0; i < 500 && procText(*shim, "comm") != "allot-job-shim\n"; ++i) ::usleep(10'000);
  EXPECT_EQ(strayShims(earlier), std::vector<pid_t>{*shim});
  EXPECT_TRUE(strayShims(with({*shim})).empty());
  ::close(ends[0]);  // the shim exits: still listed, as a zombie, until reaped
  for (int i = 0; i < 500 && procText(*shim, "stat").find(") Z ") == std::string::npos; ++i)
    ::usleep(10'000);
  EXPECT_EQ(strayShims(earlier), std::vector<pid_t>{*shim});
  waitpid(*shim, nullptr, 0);
  EXPECT_TRUE(strayShims(earlier).empty());
  ::kill(*other, SIGKILL);
  waitpid(*other, nullptr, 0);
}

// A request can only ever make a shim: a forked shim that is asked to be a server, or given
// arguments no shim takes, prints its usage and exits.
TEST_F(ShimServerProtocolTest, AForkedShimCannotBecomeAServer) {
  for (const std::string& args :
       {std::string("--server-fd\0" "3\0", 14), std::string("--bogus\0", 8)}) {
    int ends[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
    const int32_t pid = request(args, {ends[1]});
    ::close(ends[1]);
    ASSERT_GT(pid, 0);
    EXPECT_EQ(exitStatusOf(pid), 2);
    ::close(ends[0]);
  }
}

// The links of /proc/<pid>/fd: what a process holds open.
std::vector<std::string> openFilesOf(pid_t pid) {
  std::vector<std::string> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    out.push_back(std::filesystem::read_symlink(e.path(), ec).string());
  }
  return out;
}

// Plain directories stand in for a hierarchy's base here: "joining" writes "0" to a group's
// cgroup.procs, which in a plain directory is a plain file.
class CgroupBaseTest : public ShimServerProtocolTest {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/allot-shim-base-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    base_ = root_ + "/allot";
    makeGroup(base_ + "/slot-1");
    startServer({"--cgroup-base", base_});
  }
  void TearDown() override {
    ShimServerProtocolTest::TearDown();
    std::filesystem::remove_all(root_);
  }
  static void makeGroup(const std::string& dir) {
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/cgroup.procs").flush();
  }
  static std::string contentOf(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  std::string root_, base_;
};

// The server holds the base open; a shim joins a group directly in it relative to that
// descriptor (so the group is found where the base was when the server opened it, whatever its
// path names now), and holds none of the server's descriptors once joined.
TEST_F(CgroupBaseTest, AShimJoinsRelativeToTheServersBaseAndKeepsNoneOfItsDescriptors) {
  // It opens it as it starts: wait for that (5 s at most).
  auto serverHoldsBase = [&] {
    for (const auto& f : openFilesOf(server_)) {
      if (f == base_) return true;
    }
    return false;
  };
  for (int i = 0; i < 500 && !serverHoldsBase(); ++i) ::usleep(10'000);
  ASSERT_TRUE(serverHoldsBase());
  // The path no longer leads to the group: only the descriptor does.
  std::filesystem::rename(base_, root_ + "/moved");
  std::filesystem::create_directories(base_);
  int agentEnd = -1;
  const pid_t standby = readyStandby(base_ + "/slot-1", &agentEnd);
  ASSERT_GT(standby, 0);
  EXPECT_EQ(contentOf(root_ + "/moved/slot-1/cgroup.procs"), "0");
  for (const auto& f : openFilesOf(standby)) {
    EXPECT_EQ(f.find(root_), std::string::npos) << "the standby holds " << f;
  }
  ::close(agentEnd);
  EXPECT_EQ(exitStatusOf(standby), 0);  // no job came
}

// A group not found relative to the base (the agent made the base again since the server opened
// it) is joined by its path; a name that is not one directory in the base is never looked up
// relative to it.
TEST_F(CgroupBaseTest, AGroupNotFoundRelativeToTheBaseIsJoinedByItsPath) {
  std::filesystem::rename(base_, root_ + "/moved");
  makeGroup(base_ + "/slot-2");
  makeGroup(base_ + "/nested/slot-3");
  for (const std::string& group : {base_ + "/slot-2", base_ + "/nested/slot-3"}) {
    SCOPED_TRACE(group);
    int agentEnd = -1;
    const pid_t standby = readyStandby(group, &agentEnd);
    ASSERT_GT(standby, 0);
    EXPECT_EQ(contentOf(group + "/cgroup.procs"), "0");
    ::close(agentEnd);
    EXPECT_EQ(exitStatusOf(standby), 0);
  }
  // Nowhere to be found: the standby fails to join and says nothing.
  int agentEnd = -1;
  EXPECT_EQ(readyStandby(base_ + "/slot-9", &agentEnd), -1);
  ::close(agentEnd);
}

TEST_F(ShimServerProtocolTest, AServerGivenABaseThatIsNotAnAbsolutePathOrNoValueRefusesToStart) {
  for (const std::vector<std::string>& more :
       {std::vector<std::string>{"--cgroup-base", "relative/dir"},
        std::vector<std::string>{"--cgroup-base"},
        std::vector<std::string>{"--bogus", "/tmp"}}) {
    stopServer();
    startServer(more);
    EXPECT_EQ(exitStatusOf(server_), 2);
    server_ = -1;
  }
}

TEST_F(ShimServerProtocolTest, TheServerExitsWhenTheAgentsEndCloses) {
  ::close(socket_);
  socket_ = -1;
  EXPECT_EQ(exitStatusOf(server_), 0);
  server_ = -1;
}

}  // namespace
}  // namespace allot::agent
