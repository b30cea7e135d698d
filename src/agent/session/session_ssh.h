#pragma once
// SessionSsh: OpenSSH into a running session (docs/sessions.md, "SSH").
//
// Each session gets its own sshd configuration under <workDir>/session-ssh/<id>/: a host key made
// when the session starts (its public half is reported to allotd, which hands it to clients to
// pin), the owner's public keys as authorized_keys, and an sshd_config that allows only key
// logins as that one user. The directory is the agent's (root's, mode 0711) and only the agent
// writes in it; the files are the session user's, for their sshd to read. So the user can plant
// no link there, and every write is a new file made with O_EXCL|O_NOFOLLOW relative to the
// directory's descriptor, given its owner with fchown, then renamed into place (docs/access.md,
// "Root on the host"). Nothing
// listens: each connection allotd relays over the agent's tunnel starts `sshd -i` on the stream,
// as the session's user and inside the session's cgroups, so a login sees the session's GPUs and
// limits and ends with it. authorized_keys and the environment (the session's own, from its main
// process) are rewritten at every connection, so a removed key stops working at once.
//
// sshd running as a plain user can only log that user in, which needs a passwd entry for the
// uid; running as root (an agent with --run-as-owner off) it logs in root, by key only.
//
// A session in an image: sshd is started by allot-ssh-bridge (root, ssh_bridge_main.cc) instead,
// and its ForceCommand hands each login to the bridge, which runs it inside the container
// (container_login.h). Each tunnelled connection has its own sshd_config.<token> and socket
// login-<token>.sock, which its bridge removes when it ends.
//
// Plain functions over the filesystem; called from the agent's loop.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/exec/executor.h"
#include "agent/runtime/tunnel_endpoint.h"
#include "common/clock.h"
#include "common/status.h"
#include "model/agent_protocol.h"

namespace allot::agent {

struct SessionSshConfig {
  std::string sshd;      // the sshd program; "" = no SSH on this host
  std::string keygen;    // ssh-keygen, to make host keys
  std::string stateDir;  // <workDir>/session-ssh
  // Direct ports (allot-agent --ssh-direct-ports LO-HI): each session also gets an sshd of its
  // own listening on a port of this range, for networks where users reach hosts. 0 = none.
  int directPortLo = 0, directPortHi = 0;
  std::string directAddress;  // where it listens and what clients are told; "" = all, hostname
  std::string hostname;       // what clients are told when directAddress is ""
  // allot-ssh-bridge, for sessions in images ("" = they get no SSH), and the host's sftp-server,
  // which serves their sftp subsystem (the session's storage is at the same path inside).
  std::string bridge;
  std::string sftpServer = "/usr/lib/openssh/sftp-server";
};

// A session's container, for logins into it: its crun state and config.json.
using SessionContainer = Executor::ContainerFiles;

// Who a session's processes run as.
struct SessionIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  bool switchUser = false;  // the agent switches to it (else it is the agent's own)
};

class SessionSsh {
 public:
  explicit SessionSsh(SessionSshConfig config) : config_(std::move(config)) {}

  bool enabled() const { return !config_.sshd.empty(); }
  // Makes session `id`'s directory and host key, owned by `who`; before the session starts. An
  // error leaves the session without SSH (it still starts).
  Status prepare(int64_t id, const SessionIdentity& who);
  // Fills sshUser and sshHostKey of the session's report from its directory (so a restarted
  // agent reports them too); leaves them empty without SSH.
  void report(int64_t id, model::ActualSession& out) const;
  // What a new SSH connection to the session runs: `sshd -i` on the stream, as `who`, in
  // `cgroups`, trusting `authorizedKeys`, with `env` (the session's environment) in its logins;
  // with `container`, under allot-ssh-bridge, its logins inside the container.
  Result<TunnelTarget> connect(int64_t id, const SessionIdentity& who,
                               const std::vector<std::string>& authorizedKeys,
                               const std::vector<std::string>& cgroups,
                               const std::map<std::string, std::string>& env,
                               const std::optional<SessionContainer>& container = {}) const;
  // Direct port: starts the session's listening sshd once it runs (`pid` its main process, for
  // the environment), and keeps its authorized_keys current; a no-op without direct ports.
  void keepDirect(int64_t id, int pid, const SessionIdentity& who,
                  const std::vector<std::string>& authorizedKeys,
                  const std::vector<std::string>& cgroups,
                  const std::optional<SessionContainer>& container = {});
  // Every 2 s: counts the connections open to each direct port (they bypass allotd, so only the
  // host sees them) for idle culling; report() adds them to the session's connections.
  void countDirectConnections(TimeMs now);
  // Stops the session's listening sshd and removes the session's directory.
  void forget(int64_t id);

 private:
  std::string dirOf(int64_t id) const;
  // allot-ssh-bridge's command line that serves `container`'s logins on `socket` and runs `sshd`
  // (argv) as `who`, removing `cleanup` when it ends.
  std::vector<std::string> bridgeArgv(const SessionIdentity& who, const SessionContainer& container,
                                      const std::string& socket,
                                      const std::vector<std::string>& cleanup,
                                      const std::vector<std::string>& sshd) const;
  // The ForceCommand handing a login to the bridge listening on `socket`; an error when a path
  // in it would need quoting.
  Result<std::string> forceCommand(const std::string& socket) const;
  // A free port of the range, or 0.
  int freePort() const;

  struct Direct {
    int port = 0;
    pid_t pid = 0;  // 0: started by an earlier agent (it still runs in the session's cgroups)
    std::string keys;
    bool listening = false;  // seen in /proc/net/tcp
  };
  std::map<int64_t, Direct> direct_;
  std::map<int, int> directConnections_;  // port -> established connections
  TimeMs countedAt_ = 0;

  SessionSshConfig config_;
  // Sessions' (login name, host key), read once: report() runs at every status round.
  mutable std::map<int64_t, std::pair<std::string, std::string>> reported_;
};

// The sshd_config for one session (pure; tests read it).
// `port` > 0: a listening sshd (direct port) on `address` ("" = all); else one for `sshd -i`.
// `forceCommand`: every login runs it (a session in an image: the bridge's `enter`).
std::string sessionSshdConfig(const std::string& dir, const std::string& user, bool root,
                              const std::map<std::string, std::string>& env, int port = 0,
                              const std::string& address = "",
                              const std::string& forceCommand = "");

// The environment of process `pid` (/proc/PID/environ); empty when it cannot be read.
std::map<std::string, std::string> processEnvironment(int pid);

}  // namespace allot::agent
