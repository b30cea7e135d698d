#include "agent/host_ops/wipe.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "agent/exec/remove_tree.h"

namespace allot::agent {
namespace fs = std::filesystem;

namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(50);

std::string readWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The process's state letter and parent, from /proc/PID/stat; nullopt when it is gone.
struct ProcStat {
  char state = '?';
  int ppid = 0;
};
std::optional<ProcStat> procStat(int pid) {
  std::string s = readWhole("/proc/" + std::to_string(pid) + "/stat");
  auto close = s.rfind(')');
  if (close == std::string::npos || close + 4 > s.size()) return std::nullopt;
  ProcStat st;
  st.state = s[close + 2];
  std::sscanf(s.c_str() + close + 3, "%d", &st.ppid);
  return st;
}

// Gone for our purposes: no such process, or a zombie (it holds no memory, files or GPU; its
// parent reaps it).
bool gone(int pid) {
  auto st = procStat(pid);
  return !st || st->state == 'Z' || st->state == 'X';
}

std::string procName(int pid) {
  std::string comm = readWhole("/proc/" + std::to_string(pid) + "/comm");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm.empty() ? "?" : comm;
}

// The agent and every process above it: never killed, whatever their environment (an agent
// started by hand from a job's shell inherits ALLOT_JOB_ID).
std::set<int> selfAndAncestors() {
  std::set<int> out;
  for (int pid = ::getpid(); pid > 0 && out.insert(pid).second;) {
    auto st = procStat(pid);
    if (!st) break;
    pid = st->ppid;
  }
  return out;
}

bool environHas(int pid, const std::string& entryPrefix) {
  std::string env = readWhole("/proc/" + std::to_string(pid) + "/environ");
  size_t pos = 0;
  while (pos < env.size()) {
    size_t end = env.find('\0', pos);
    if (end == std::string::npos) end = env.size();
    if (env.compare(pos, entryPrefix.size(), entryPrefix) == 0) return true;
    pos = end + 1;
  }
  return false;
}

std::vector<int> allPids() {
  std::vector<int> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid > 0 && *end == '\0') out.push_back(static_cast<int>(pid));
  }
  ::closedir(d);
  return out;
}

std::vector<int> cgroupPids(const std::string& dir) {
  std::vector<int> out;
  std::ifstream in(dir + "/cgroup.procs");
  int pid = 0;
  while (in >> pid) out.push_back(pid);
  return out;
}

std::string mib(uintmax_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

// Bytes of regular files under p, symlinks not followed.
uintmax_t sizeOf(const fs::path& p) {
  std::error_code ec;
  auto st = fs::symlink_status(p, ec);
  if (ec) return 0;
  if (fs::is_regular_file(st)) return fs::file_size(p, ec);
  if (!fs::is_directory(st)) return 0;
  uintmax_t total = 0;
  for (auto it =
           fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code fec;
    if (it->is_regular_file(fec) && !it->is_symlink(fec)) total += it->file_size(fec);
  }
  return total;
}

class Wipe {
 public:
  Wipe(const WipeOptions& o, const std::function<void(std::string_view)>& onLine)
      : o_(o), onLine_(onLine) {}

  WipeResult run() {
    if (!o_.liveJobs.empty()) {
      std::string ids;
      for (auto id : o_.liveJobs) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
      return fail("jobs still run on this host (" + ids +
                  "): a wipe needs a drained host and will not destroy a running job's work");
    }
    for (const auto& [root, what] : roots()) {
      std::error_code ec;
      if (fs::is_symlink(fs::symlink_status(root, ec)))
        return fail("refusing to wipe " + what + " " + root + ": it is a symlink (to " +
                    fs::read_symlink(root, ec).string() + "), which could point anywhere");
    }
    killStrays();
    if (!result_.reason.empty()) return finish();
    clearEntries(o_.workDir + "/jobs", "job directories", {});
    if (!o_.stateDir.empty() && o_.stateDir != o_.workDir)
      clearEntries(o_.stateDir + "/jobs", "job records", {});
    clearEntries(o_.scratchDir, "scratch entries", {});
    // Sessions' host keys and authorized keys: never a new tenant's.
    clearEntries(o_.workDir + "/session-ssh", "session SSH set-ups", {});
    if (!o_.step.home) {
      line("home data: kept (the storage policy keeps team homes on this host)");
    } else {
      if (o_.homeDir.empty()) {
        line(
            "home data: this host keeps no team home data (--home-dir not set); nothing to "
            "remove");
      } else {
        clearEntries(o_.homeDir, "home entries", {});
      }
      if (!o_.sessionHomeDir.empty()) clearEntries(o_.sessionHomeDir, "session homes", {});
      if (!o_.teamDir.empty()) clearEntries(o_.teamDir, "team directories", {});
    }
    clearEntries(o_.workDir + "/hooks", "earlier hook runs", {std::to_string(o_.currentHookRun)});
    if (!result_.reason.empty()) return finish();
    verifyGpus();
    return finish();
  }

 private:
  std::vector<std::pair<std::string, std::string>> roots() const {
    std::vector<std::pair<std::string, std::string>> r = {
        {o_.workDir, "the work directory"},
        {o_.workDir + "/jobs", "the job directories"},
        {o_.workDir + "/hooks", "the hook runs"},
        {o_.scratchDir, "the scratch root"}};
    r.push_back({o_.workDir + "/session-ssh", "the session SSH root"});
    if (!o_.stateDir.empty() && o_.stateDir != o_.workDir)
      r.push_back({o_.stateDir + "/jobs", "the job records"});
    if (o_.step.home && !o_.homeDir.empty()) r.push_back({o_.homeDir, "the home root"});
    if (o_.step.home && !o_.sessionHomeDir.empty())
      r.push_back({o_.sessionHomeDir, "the session home root"});
    if (o_.step.home && !o_.teamDir.empty()) r.push_back({o_.teamDir, "the team root"});
    return r;
  }

  void line(const std::string& s) {
    result_.output += s + "\n";
    if (onLine_) onLine_(s + "\n");
  }
  WipeResult fail(const std::string& why) {
    if (result_.reason.empty()) result_.reason = why;
    line("wipe failed: " + why);
    return finish();
  }
  WipeResult finish() {
    result_.ok = result_.reason.empty();
    return result_;
  }
  void setFailure(const std::string& why) {
    if (result_.reason.empty()) result_.reason = why;
    line("wipe failed: " + why);
  }

  void killStrays() {
    const std::set<int> spare = selfAndAncestors();
    std::map<int, std::string> killed;  // pid -> why
    auto killOne = [&](int pid, const std::string& why) {
      if (spare.count(pid) || killed.count(pid) || gone(pid)) return;
      std::string name = procName(pid);
      if (::kill(pid, SIGKILL) == 0 || errno == ESRCH) killed[pid] = name + ", " + why;
    };
    for (int pid : allPids()) {
      if (!environHas(pid, "ALLOT_JOB_ID=")) continue;
      if (!o_.strayMarker.empty() && !environHas(pid, o_.strayMarker)) continue;
      killOne(pid, "a job's");
    }
    for (const auto& dir : o_.jobCgroups) {
      // cgroup.kill (v2, Linux 5.14+) kills the whole group atomically, even processes forking
      // as we read cgroup.procs; elsewhere each listed process is killed.
      std::error_code ec;
      if (fs::exists(dir + "/cgroup.kill", ec)) {
        if (std::ofstream k(dir + "/cgroup.kill"); k && (k << "1").flush())
          line("killed what was left in cgroup " + dir);
      }
      for (int pid : cgroupPids(dir)) killOne(pid, "in cgroup " + dir);
    }
    // Whatever still holds a GPU of this host is the previous tenant's, allot's job or not (a
    // login shell's python): it goes too. NVML names host PIDs, so the agent must run in the
    // host's PID namespace (docs/agent.md), as GPU monitors do.
    if (o_.gpus) {
      auto samples = o_.gpus->sample();
      if (samples.ok()) {
        for (const auto& s : *samples)
          for (int pid : s.pids) killOne(pid, "on GPU " + std::to_string(s.index));
      }
    }
    const auto deadline = SteadyClock::now() + std::chrono::milliseconds(o_.killWaitMs);
    std::vector<int> left;
    for (;;) {
      left.clear();
      for (const auto& [pid, _] : killed)
        if (!gone(pid)) left.push_back(pid);
      if (left.empty() || SteadyClock::now() >= deadline) break;
      std::this_thread::sleep_for(kPollInterval);
    }
    if (killed.empty()) {
      line("killed 0 stray processes");
    } else {
      std::string list;
      for (const auto& [pid, what] : killed)
        list += (list.empty() ? "" : ", ") + std::to_string(pid) + " (" + what + ")";
      line("killed " + std::to_string(killed.size()) + " stray process" +
           (killed.size() == 1 ? "" : "es") + ": " + list);
    }
    if (!left.empty()) {
      std::string pids;
      for (int pid : left) pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
      setFailure("processes still alive " + std::to_string(o_.killWaitMs) +
                 " ms after SIGKILL: " + pids + " (stuck in the kernel, e.g. on a hung GPU?)");
    }
  }

  // Removes every entry of root but those named in keep; the root itself stays.
  void clearEntries(const std::string& root, const std::string& what,
                    const std::set<std::string>& keep) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(root, ec))) {
      line("removed 0 " + what + " (" + root + " does not exist)");
      return;
    }
    size_t count = 0;
    uintmax_t bytes = 0;
    std::vector<fs::path> entries;
    for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::directory_iterator();
         it.increment(ec))
      entries.push_back(it->path());
    if (ec) return setFailure("cannot list " + root + ": " + ec.message());
    for (const auto& p : entries) {
      if (keep.count(p.filename().string())) continue;
      // A root misconfigured above the work directory must not take the agent's state with it.
      if (holdsWorkDir(p)) {
        line("kept " + p.string() + ": it holds the agent's work directory");
        continue;
      }
      uintmax_t size = sizeOf(p);
      // What a tenant left may be any tree (removeTree's rules): fs::remove_all held a descriptor
      // per level, so a deep enough one failed the wipe and kept the host from its next team.
      if (int err = removeTree(p.string()); err != 0)
        return setFailure("cannot remove " + p.string() + ": " + std::strerror(err));
      ++count;
      bytes += size;
    }
    line("removed " + std::to_string(count) + " " + what + " (" + mib(bytes) + ") from " + root);
  }

  bool holdsWorkDir(const fs::path& p) const {
    const std::string work = fs::path(o_.workDir).lexically_normal().string();
    const std::string entry = p.lexically_normal().string();
    return work == entry || work.rfind(entry + "/", 0) == 0;
  }

  void verifyGpus() {
    if (!o_.gpus) return;
    auto gpus = o_.gpus->discover();
    if (!gpus.ok()) return setFailure("cannot list the GPUs: " + gpus.status().message());
    std::map<int, int64_t> memory;
    for (const auto& g : *gpus) memory[g.index] = g.memoryMib;
    const auto deadline = SteadyClock::now() + std::chrono::milliseconds(o_.gpuFreeWaitMs);
    for (;;) {
      auto samples = o_.gpus->sample();
      if (!samples.ok()) return setFailure("cannot read the GPUs: " + samples.status().message());
      std::vector<std::string> busy, report;
      for (const auto& s : *samples) {
        const int64_t used = s.memoryUsedMib.value_or(0);
        const int64_t baseline = freeGpuBaselineMib(memory[s.index]);
        std::string pids;
        for (int pid : s.pids)
          pids += (pids.empty() ? "" : ", ") + std::to_string(pid) + " (" + procName(pid) + ")";
        const std::string gpu = "GPU " + std::to_string(s.index);
        if (!s.pids.empty() || used > baseline) {
          busy.push_back(gpu + " is not free: " + std::to_string(used) + " MiB used (at most " +
                         std::to_string(baseline) + " allowed)" +
                         (pids.empty() ? ", no processes" : ", processes " + pids));
        } else {
          report.push_back(gpu + ": free (" +
                           (s.memoryUsedMib ? std::to_string(used) + " MiB used"
                                            : std::string("memory used unknown")) +
                           ", no processes)");
        }
      }
      if (busy.empty()) {
        for (const auto& r : report) line(r);
        if (samples->empty()) line("no GPUs to verify");
        return;
      }
      if (SteadyClock::now() >= deadline) {
        for (const auto& r : report) line(r);
        std::string all;
        for (const auto& b : busy) all += (all.empty() ? "" : "; ") + b;
        return setFailure(all);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  const WipeOptions& o_;
  const std::function<void(std::string_view)>& onLine_;
  WipeResult result_;
};

}  // namespace

int64_t freeGpuBaselineMib(int64_t gpuMemoryMib) {
  return std::max<int64_t>(512, gpuMemoryMib / 100);
}

WipeResult runWipe(const WipeOptions& options,
                   const std::function<void(std::string_view)>& onLine) {
  return Wipe(options, onLine).run();
}

}  // namespace allot::agent
