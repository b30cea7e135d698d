#pragma once
// ForkServerProcess: keeps the host's Jupyter fork server (allot-jupyter-forkserver serve) running
// as a child of the agent. It pre-imports Jupyter once so that a session starts in tens of
// milliseconds instead of ~0.4 s (docs/design/sessions.md, 2.3). Sessions never depend on it:
// while it is down or still importing, their client half falls back to starting Jupyter plainly.
//
// It dies with the agent (PR_SET_PDEATHSIG); sessions it forked live on in their own jobs'
// cgroups, and a new agent starts a new server on the same socket.

#include <sys/types.h>

#include <string>

#include "common/clock.h"

namespace allot::agent {

class ForkServerProcess {
 public:
  // `program`: the allot-jupyter-forkserver script; `socket`: where it listens; `jobsDir`: the
  // executor's job directories, from which it tells session jobs (the only ones it serves) from
  // others.
  ForkServerProcess(std::string program, std::string socket, std::string jobsDir,
                    const Clock& clock);
  ~ForkServerProcess();
  ForkServerProcess(const ForkServerProcess&) = delete;
  ForkServerProcess& operator=(const ForkServerProcess&) = delete;

  // Starts it when it is not running and its back-off has passed; reaps it when it has ended.
  // Called from the agent's tick.
  void keepRunning();
  const std::string& socket() const { return socket_; }
  const std::string& program() const { return program_; }

 private:
  std::string program_;
  std::string socket_;
  std::string jobsDir_;
  const Clock& clock_;
  pid_t pid_ = -1;
  TimeMs startedAt_ = 0;
  TimeMs nextStart_ = 0;
  int64_t backoffMs_ = 1000;
};

}  // namespace allot::agent
