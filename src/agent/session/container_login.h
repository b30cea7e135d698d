#pragma once
// Logins into a session that runs in an image (docs/environments.md, "SSH into a session in an
// image"): what allot-ssh-bridge (ssh_bridge_main.cc) reads and decides, apart from the system
// calls, so that tests can check it.
//
// sshd still runs on the host, as the session's owner, in its cgroups: it holds the host key,
// checks the owner's keys and forwards ports (the container shares the host's network). Its
// ForceCommand is `allot-ssh-bridge enter SOCKET`: that runs as the owner too and hands its
// standard descriptors (the login's terminal, or its pipes) and a LoginRequest over SOCKET to
// the root bridge, which joins the container's mount, PID and IPC namespaces, drops to the
// container's user, groups, no capabilities, no new privileges and seccomp filter, exactly as
// crun started the session's process, and runs the login's shell or command there. The bridge
// answers with the login's exit code.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace allot::agent {

// What the owner's side asks for: a command (SSH_ORIGINAL_COMMAND; "" = an interactive shell),
// whether its standard input is a terminal, and what it brings of the client's environment.
struct LoginRequest {
  std::string command;
  bool tty = false;
  std::map<std::string, std::string> env;
};

// The request's wire form (one datagram of JSON; at most kMaxLoginRequest bytes), and its
// parsing, which keeps only the variables a login may bring (loginVariable) and refuses the rest.
inline constexpr size_t kMaxLoginRequest = 64 * 1024;
std::string encodeLoginRequest(const LoginRequest& request);
Result<LoginRequest> decodeLoginRequest(const std::string& text);
// The client's variables a login carries into the container: the terminal's type, the locale,
// and what sshd says of the connection. Everything else comes from the container's own.
bool loginVariable(const std::string& name);

// The session's process as crun started it: crun's state (`<root>/<id>/status`, its "pid" and
// "process-start-time") and the bundle's config.json (process.user, env and cwd, and the
// compiled seccomp program in the annotation run.oci.seccomp_bpf_data).
struct ContainerProcess {
  pid_t pid = 0;
  uint64_t startTime = 0;  // field 22 of /proc/PID/stat: tells a reused pid apart (proc.h)
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::vector<std::string> env;  // KEY=VALUE
  std::string cwd = "/";
  std::string seccompBpf;  // raw sock_filter array; "" when the container has no filter
};
// An error when a part is missing or malformed, or when config.json names a seccomp filter that
// is not compiled (linux.seccomp without the annotation): a login never runs with less
// confinement than the session.
Result<ContainerProcess> parseContainerProcess(const std::string& crunStatus,
                                               const std::string& configJson);

// The login's environment: the container's, then the request's variables, then the login's own
// names (USER, LOGNAME, SHELL; HOME kept from the container when it sets one).
std::vector<std::string> loginEnvironment(const ContainerProcess& process,
                                          const LoginRequest& request, const std::string& user,
                                          const std::string& shell);
// What runs: `shell` as a login shell ("-bash") for an interactive login, else `shell -c CMD`.
std::vector<std::string> loginArgv(const std::string& shell, const std::string& command);

}  // namespace allot::agent
