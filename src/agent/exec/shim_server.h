#pragma once
// How the agent starts allot-job-shim processes: through a shim server when it can, else with
// posix_spawn.
//
// Starting a program costs far more than forking one that is already running: exec, mapping
// the binary, and glibc's start-up, which reads the CPU's features with some sixty `cpuid`
// instructions that each trap to the hypervisor on a virtual machine (docs/benchmarks.md,
// section 2c). For a trivial job that was a third of its shim's CPU. So the executor keeps one
// `allot-job-shim --server-fd 3` running (protocol in job_shim_main.cc) and asks it for each new
// shim; the server forks with CLONE_PARENT, so every shim is still the agent's own child, in a
// session of its own, reaped and adopted exactly as a spawned one.
//
// The server never sees a job: the request carries only the new shim's arguments (--job-fd 3 or
// --standby-fd 3 with its groups) and the descriptor the job will come on. Should the server
// fail (it died, it answered wrong, it did not answer within kAnswerTimeoutMs) it is killed, the
// shim is spawned directly, and a new server is started only after kRetryMs. A server that
// failed after it had forked the shim leaves the agent a child whose pid it never learnt: that
// shim sees end-of-file on its descriptor (the caller closes it and uses a fresh pair) and
// exits, and the executor adopts it for reaping (strayShims) while mayHaveLeftAShim() holds.
//
// Driven from the agent's loop only; not thread-safe.

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace allot::agent {

// posix_spawns `argv` (argv[0]: the shim binary's path) in a session of its own, with
// childEnd as its descriptor `childFd`, stdin on /dev/null, every signal at its default and
// none blocked, and an empty environment. childEnd stays open: the caller closes it.
Result<pid_t> spawnShimProcess(const std::vector<std::string>& argv, int childEnd, int childFd);

class ShimServer {
 public:
  static constexpr int kAnswerTimeoutMs = 2'000;
  static constexpr int64_t kRetryMs = 10'000;

  // cgroupBases: the directories of the agent's job groups (CgroupManager::bases()); the server
  // holds each open, and the shims it forks join groups directly in them relative to it.
  ShimServer(std::string shimPath, const Clock& clock, std::vector<std::string> cgroupBases = {});
  // Closes the socket, on which the server exits, and reaps it.
  ~ShimServer();
  ShimServer(const ShimServer&) = delete;
  ShimServer& operator=(const ShimServer&) = delete;

  // A new shim with `args` (without argv[0]) and childEnd as its descriptor 3, forked by the
  // server; an error (logged) when the server cannot make it, for the caller to spawn the shim
  // itself. childEnd stays open: the caller closes it.
  Result<pid_t> fork(const std::vector<std::string>& args, int childEnd);

  // Reaps servers killed earlier that have exited since; never waits.
  void reapKilled();
  // Whether a server failed lately after a request reached it: it may have forked a shim whose
  // pid the agent never learnt (see strayShims).
  bool mayHaveLeftAShim() const { return clock_.nowMs() < strayCheckUntil_; }

  // The server's pid; -1 while there is none (tests).
  pid_t pid() const { return pid_; }
  // The server's pid and those of servers killed and not reaped yet: shims too, by their name,
  // but not strays (strayShims).
  std::vector<pid_t> serverPids() const {
    std::vector<pid_t> out = killed_;
    if (pid_ > 0) out.push_back(pid_);
    return out;
  }

 private:
  Status start();
  // Closes the socket and kills the server; it is reaped by reapKilled (a process in
  // uninterruptible sleep must not hold the agent's loop).
  void stop();

  std::string shimPath_;
  const Clock& clock_;
  std::vector<std::string> cgroupBases_;
  pid_t pid_ = -1;
  int socket_ = -1;
  TimeMs retryAt_ = 0;  // no new server before then, after one failed
  TimeMs strayCheckUntil_ = 0;
  std::vector<pid_t> killed_;  // servers killed, not reaped yet
};

// This process's children that are allot-job-shim processes (by their command name) and not in
// `known`: shims a failed server forked (see ShimServer), alive or exited.
std::vector<pid_t> strayShims(const std::vector<pid_t>& known);

}  // namespace allot::agent
