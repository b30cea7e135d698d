#include "agent/exec/proc.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace allot::agent {
namespace {

// A process may name itself anything: the fields after its name must still be found.
TEST(ProcStatTest, ReadsStateAndStartTimeWhateverTheProcessCallsItself) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    prctl(PR_SET_NAME, ") S 1 2 3 (x", 0, 0, 0);
    (void)!write(ready[1], "r", 1);
    pause();
    _exit(0);
  }
  char byte;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  auto st = readProcStat(child);
  ASSERT_TRUE(st);
  EXPECT_TRUE(st->state == 'S' || st->state == 'R') << st->state;  // on its way to pause()
  auto self = readProcStat(getpid());
  ASSERT_TRUE(self);
  EXPECT_GE(st->startTicks, self->startTicks);
  EXPECT_TRUE(sameLiveProcess(child, st->startTicks));
  EXPECT_FALSE(sameLiveProcess(child, st->startTicks + 1));  // a newcomer with its pid

  kill(child, SIGKILL);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);
  auto zombie = readProcStat(child);
  ASSERT_TRUE(zombie);
  EXPECT_EQ(zombie->state, 'Z');
  EXPECT_FALSE(sameLiveProcess(child, st->startTicks));
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(readProcStat(child));
  EXPECT_FALSE(readProcStat(0));
  EXPECT_FALSE(readProcStat(-1));
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace allot::agent
