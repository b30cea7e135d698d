// What the agent reads of a session's Jupyter for idle culling: the session's owner runs that
// server, so its replies are input like any other.
#include "agent/session/jupyter_probe.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "common/time_format.h"

namespace allot::agent {
namespace {

TEST(JupyterProbe, ReadsConnectionsBusyKernelsAndLastActivity) {
  auto a = jupyterActivityOf(
      R"({"connections": 2, "kernels": 3, "last_activity": "2026-12-06T04:00:00.000000Z"})",
      R"([{"execution_state": "busy"}, {"execution_state": "idle"}, {"execution_state": "busy"}])");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->connections, 2);
  EXPECT_EQ(a->busyKernels, 2);
  EXPECT_EQ(a->lastActivity, parseTime("2026-12-06T04:00:00Z", 0).value());
}

// Found in review after fuzz/wire_fuzz.cc's findings: value() threw on a field of another type,
// which ended the agent's connection loop (the host went lost), and cast 1e30 into an int.
TEST(JupyterProbe, FieldsOfAnotherTypeOrSizeReadAsAbsent) {
  for (const char* status :
       {R"({"connections": 1e30})", R"({"connections": "x"})", R"({"connections": -5})",
        R"({"connections": 18446744073709551615})", R"({"connections": null})",
        R"({"last_activity": 12})", R"({"last_activity": "+99999999999999999999999h"})"}) {
    std::optional<JupyterActivity> a;
    EXPECT_NO_THROW(a = jupyterActivityOf(status, "[]")) << status;
    ASSERT_TRUE(a.has_value()) << status;
    EXPECT_GE(a->connections, 0) << status;
    EXPECT_EQ(a->lastActivity, 0) << status;
  }
  for (const char* kernels : {R"([{"execution_state": 5}])", R"([1, "busy", null, []])",
                              R"([{"execution_state": ["busy"]}])"}) {
    std::optional<JupyterActivity> a;
    EXPECT_NO_THROW(a = jupyterActivityOf("{}", kernels)) << kernels;
    ASSERT_TRUE(a.has_value()) << kernels;
    EXPECT_EQ(a->busyKernels, 0) << kernels;
  }
  EXPECT_FALSE(jupyterActivityOf("[]", "[]").has_value());
  EXPECT_FALSE(jupyterActivityOf("{}", "{}").has_value());
  EXPECT_FALSE(jupyterActivityOf(std::string(100'000, '['), "[]").has_value());
}

// Attack, by a session's owner, who runs its Jupyter: an answer sent a byte at a time, each byte
// within the probe's timeout. The probe gave each recv that timeout but the whole answer none, so
// it never returned, and the agent's idle data for every session of the host stopped with it.
// Now the answer has one deadline: the probe gives up, whatever the server goes on sending.
TEST(JupyterProbe, AnAnswerThatNeverEndsIsGivenUpOn) {
  char tmpl[] = "/tmp/allot-probe-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string path = dir + "/jupyter.sock";
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  std::atomic<bool> done = false;
  std::thread dripper([&] {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n";
    bool open = ::send(fd, head.data(), head.size(), MSG_NOSIGNAL) > 0;
    // Until the probe hangs up (bounded, should it never).
    for (int i = 0; open && !done && i < 3000; ++i) {
      open = ::send(fd, "x", 1, MSG_NOSIGNAL) == 1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::close(fd);
  });
  EXPECT_FALSE(probeJupyter(path, 7, "token", 200).has_value());
  done = true;
  dripper.join();
  ::close(listener);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace allot::agent
