#pragma once
// SessionLauncher: what the agent runs for a job that is an interactive session
// (docs/sessions.md), and what it reports about it.
//
// A session goes through the executor like any job (its cgroup, GPU rules, limits and owner come
// from there); this class only decides its command and environment, and watches it:
//  - Jupyter apps listen on a Unix socket in the session's working directory (mode 0600, the
//    owner's: other users of the host cannot reach it, root can), under the base URL
//    /sessions/{id}/, with a random token made here and passed in JUPYTER_TOKEN (never on the
//    command line, which every user of the host can read);
//  - Debian's jupyter-server and jupyter-notebook start through the host's pre-imported fork
//    server (allot-jupyter-forkserver) when it runs, else as plain programs (slower: ~0.4 s of
//    Python imports);
//  - "command" sessions run the profile's command as it is.
// Tokens are kept under <workDir>/sessions/ (root's, 0600) so that a restarted agent reports the
// same ones.

#include <sys/types.h>

#include <cstdint>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/exec/executor.h"
#include "agent/session/jupyter_probe.h"
#include "common/clock.h"
#include "model/agent_protocol.h"

namespace allot::agent {

struct SessionLauncherConfig {
  std::string stateDir;        // <workDir>/sessions: tokens
  std::string forkServer;      // path of allot-jupyter-forkserver; "" = none
  std::string forkServerSock;  // its socket; used when it exists
  std::string homeRoot;        // `local` storage: user U's persistent home is <homeRoot>/U
  std::string scratchRoot;     // `scratch` storage: the job's $ALLOT_SCRATCH, <scratchRoot>/<id>
};

// Storage (docs/sessions.md, "Storage"): where a session's files live, $ALLOT_STORAGE, which is
// also Jupyter's root directory and, for the persistent kinds, $HOME:
//  - scratch: the job's own scratch directory, removed when the session ends;
//  - local: <homeRoot>/<user> on this host, kept between sessions (allotd prefers this host for
//    the user's next local session);
//  - shared: <sharedRoot>/<user>, allotd's shared directory (an NFS mount on every host).
struct SessionStorage {
  std::string kind;
  std::string path;
};

class SessionLauncher {
 public:
  explicit SessionLauncher(SessionLauncherConfig config);

  // Fills the command and environment of `spec` (already holding the job's own) for the session
  // `d`; `workPath` is the job's working directory, where the Jupyter socket goes. `asRoot`: the
  // session's processes run as root (an agent with --run-as-owner off, run by root).
  // `uid`/`gid` own the persistent storage directories it makes (the session's identity).
  Status prepare(const model::DesiredJob& d, const std::string& workPath, bool asRoot, uid_t uid,
                 gid_t gid, JobSpec& spec);
  // Where session `d` keeps its files.
  Result<SessionStorage> storageOf(const model::DesiredJob& d) const;
  // The running session's state for the agent's report.
  model::ActualSession report(const model::DesiredJob& d, const std::string& workPath);
  // The Unix socket the session's Jupyter listens on.
  static std::string socketPath(const std::string& workPath);
  // Drops what is kept about a session the executor forgot (whose forget() removes its scratch
  // storage, the job's scratch directory).
  void forget(int64_t id);
  // Every kUsageEveryMs (every kProbeEveryMs while a session is in its first minute), measures
  // each running session's storage like du, on a thread of its own (a shared directory may be
  // slow); report() carries the newest figures.
  void refreshUsage(TimeMs now);
  // Every kProbeEveryMs, asks each running Jupyter session (id, working directory) how it is
  // used, on a thread of its own so that a slow Jupyter never holds up the agent's loop; report()
  // carries the newest answers. Called from the agent's tick.
  void refreshActivity(TimeMs now, const std::vector<std::pair<int64_t, std::string>>& sessions);

  // Two small requests on a Unix socket per session: cheap, and fresh enough for idle times of
  // seconds (tests) as well as the usual half hour.
  static constexpr TimeMs kProbeEveryMs = 2000;
  static constexpr TimeMs kUsageEveryMs = 15'000;

 private:
  std::string tokenPath(int64_t id) const;
  std::optional<std::string> token(int64_t id);

  SessionLauncherConfig config_;
  std::map<int64_t, std::string> tokens_;  // running sessions' Jupyter tokens
  std::map<int64_t, JupyterActivity> activity_;
  std::future<std::map<int64_t, std::optional<JupyterActivity>>> probe_;
  TimeMs probedAt_ = 0;
  std::map<int64_t, SessionStorage> storage_;  // running sessions'
  std::map<int64_t, int64_t> usage_;           // bytes, as last measured
  std::map<int64_t, TimeMs> storageSeenAt_;    // when refreshUsage() first saw each
  std::future<std::map<int64_t, int64_t>> measuring_;
  TimeMs measuredAt_ = 0;
};

}  // namespace allot::agent
