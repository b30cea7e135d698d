// ExitWatch wakes its owner when a watched process exits, once per process, and never for one it
// no longer watches.

#include "agent/runtime/exit_watch.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>

namespace allot::agent {
namespace {

// A child that sleeps until killed; its pid.
pid_t sleeper() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  return pid;
}

TEST(ExitWatchTest, AWatchedProcessThatExitsWakesTheOwnerOnce) {
  boost::asio::io_context io;
  int wakes = 0;
  ExitWatch watch(io.get_executor(), [&] { ++wakes; });
  const pid_t a = sleeper(), b = sleeper();
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  watch.update({{1, a}, {2, b}});
  io.poll();
  EXPECT_EQ(wakes, 0) << "nothing has exited yet";

  // b is no longer watched (its job ended here by other means): its exit wakes nobody.
  watch.update({{1, a}});
  ::kill(b, SIGKILL);
  ::waitpid(b, nullptr, 0);
  ::kill(a, SIGKILL);
  // Bounded: the wake comes when a's pidfd turns readable.
  for (int i = 0; i < 1000 && wakes == 0; ++i) io.run_for(std::chrono::milliseconds(10));
  EXPECT_EQ(wakes, 1);
  ::waitpid(a, nullptr, 0);
  // The same set again opens nothing new: no second wake for the same exit.
  watch.update({{1, a}});
  io.run_for(std::chrono::milliseconds(20));
  EXPECT_EQ(wakes, 1);
}

}  // namespace
}  // namespace allot::agent
