#pragma once
// What /proc says about a process, for telling a live process from a dead one whose pid was
// reused. Linux only.

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace allot::agent {

struct ProcStat {
  char state = '?';         // 'R', 'S', 'Z' (exited, not yet reaped), ...
  uint64_t startTicks = 0;  // field 22: start time in clock ticks since boot
};

// nullopt when there is no such process.
std::optional<ProcStat> readProcStat(pid_t pid);

// True when pid is a live (not zombie) process that started at startTicks: the same process we
// recorded, not a newcomer holding a recycled pid.
bool sameLiveProcess(pid_t pid, uint64_t startTicks);

}  // namespace allot::agent
