#include "agent/exec/proc.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace allot::agent {

std::optional<ProcStat> readProcStat(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // The command name (field 2) may hold spaces and parentheses; fields resume after the last ')'.
  size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  ProcStat st;
  rest >> st.state;
  std::string skip;
  for (int field = 4; field < 22; ++field) rest >> skip;  // ppid .. itrealvalue
  if (!(rest >> st.startTicks)) return std::nullopt;
  return st;
}

bool sameLiveProcess(pid_t pid, uint64_t startTicks) {
  auto st = readProcStat(pid);
  return st && st->state != 'Z' && st->startTicks == startTicks;
}

}  // namespace allot::agent
