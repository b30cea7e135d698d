#include "agent/exec/proc.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace allot::agent {

std::optional<ProcStat> readProcStat(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  // Read with plain system calls: the agent asks this of each job's shim as the job starts and
  // ends, and a stream's buffers and locale cost more than the read itself.
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[1024];  // pid, a name of at most 64 bytes, and 20 numbers fit well within
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  // The command name (field 2) may hold spaces and parentheses; fields resume after the last ')'.
  const char* close = std::strrchr(buf, ')');
  if (close == nullptr) return std::nullopt;
  ProcStat st;
  unsigned long long ticks = 0;
  // After ')': state (field 3), fields 4..21 (ppid .. itrealvalue), then starttime.
  if (std::sscanf(close + 1,
                  " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                  &st.state, &ticks) != 2) {
    return std::nullopt;
  }
  st.startTicks = ticks;
  return st;
}

bool sameLiveProcess(pid_t pid, uint64_t startTicks) {
  auto st = readProcStat(pid);
  return st && st->state != 'Z' && st->startTicks == startTicks;
}

}  // namespace allot::agent
