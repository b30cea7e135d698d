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
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/fd_passing.h"

namespace allot::agent {
namespace {

class ShimServerProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int ends[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends), 0);
    auto pid = spawnShimProcess({ALLOT_JOB_SHIM_PATH, "--server-fd", "3"}, ends[1], 3);
    ::close(ends[1]);
    ASSERT_TRUE(pid.ok()) << pid.status().message();
    server_ = *pid;
    socket_ = ends[0];
  }
  void TearDown() override {
    if (socket_ >= 0) ::close(socket_);
    if (server_ > 0) {
      ::kill(server_, SIGKILL);
      waitpid(server_, nullptr, 0);
    }
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
  EXPECT_EQ(strayShims(earlier), std::vector<pid_t>{*shim});
  EXPECT_TRUE(strayShims(with({*shim})).empty());
  ::close(ends[0]);  // the shim exits: still listed, as a zombie, until reaped
  for (int i = 0; i < 500; ++i) {
    auto st = std::ifstream("/proc/" + std::to_string(*shim) + "/stat");
    std::string text((std::istreambuf_iterator<char>(st)), {});
    if (text.find(") Z ") != std::string::npos) break;
    ::usleep(10'000);
  }
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

TEST_F(ShimServerProtocolTest, TheServerExitsWhenTheAgentsEndCloses) {
  ::close(socket_);
  socket_ = -1;
  EXPECT_EQ(exitStatusOf(server_), 0);
  server_ = -1;
}

}  // namespace
}  // namespace allot::agent
