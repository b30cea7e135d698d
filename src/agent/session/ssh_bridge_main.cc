// allot-ssh-bridge: SSH logins into a session that runs in an image (container_login.h says why
// sshd stays on the host). Two modes:
//
//   allot-ssh-bridge serve --socket PATH --user NAME --container-state FILE
//                          --container-config FILE [--uid U --gid G [--groups G1,G2...]]
//                          [--sftp SFTP_SERVER] [--cleanup FILE]... -- SSHD [ARG]...
// Started by the agent, as root, in the session's cgroups, with an empty environment: for one
// tunnelled connection (SSHD is `sshd -i ...` on the inherited standard descriptors) or for a
// session's direct port (`sshd -D ...`). It makes the listening socket PATH (a directory only
// root may write; the socket is the owner's, mode 0600), runs SSHD as the owner (--uid), and
// serves logins until SSHD exits, then removes PATH and each --cleanup FILE. A login is accepted
// from the owner only (SO_PEERCRED), and runs in a process of its own that joins the container
// (below) and answers with the login's exit status.
//
//   allot-ssh-bridge enter SOCKET
// sshd's ForceCommand, as the owner: sends its standard descriptors and the LoginRequest to
// SOCKET, and exits with the status that comes back.
//
// The sftp subsystem (the command "internal-sftp") runs SFTP_SERVER on the host, not in the
// container, whose image need not have one; it runs as the container's user, confined the same
// way, starting in the session's home: the session's storage is mounted at the same path in the
// container, so it serves the same files.
//
// Joining the container, as crun's exec would: the process named by crun's state, checked by its
// start time and held by a pidfd, gives its mount, PID and IPC namespaces (setns); the login then
// runs in a child (the new PID namespace's member), with a session of its own whose controlling
// terminal is the login's (TIOCSCTTY, only when that terminal is the caller's own), no capability
// in any set, the container's user and groups, no new privileges and the container's seccomp
// program, in the shell the image has (bash, else sh).

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/session/container_login.h"

extern char** environ;

namespace {

using allot::agent::ContainerProcess;
using allot::agent::LoginRequest;

struct ServeArgs {
  std::string socket, user, containerState, containerConfig;
  std::vector<std::string> cleanup;  // files removed at the end (the connection's sshd_config)
  std::string sftp;                  // the host's sftp-server, for the sftp subsystem
  long long uid = -1, gid = -1;
  std::vector<gid_t> groups;
  std::vector<std::string> sshd;
};

bool parseServe(int argc, char** argv, ServeArgs* a) {
  int i = 2;
  for (; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--") {
      ++i;
      break;
    }
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (k == "--socket")
      a->socket = v;
    else if (k == "--user")
      a->user = v;
    else if (k == "--container-state")
      a->containerState = v;
    else if (k == "--container-config")
      a->containerConfig = v;
    else if (k == "--cleanup")
      a->cleanup.push_back(v);
    else if (k == "--sftp")
      a->sftp = v;
    else if (k == "--uid")
      a->uid = std::atoll(v.c_str());
    else if (k == "--gid")
      a->gid = std::atoll(v.c_str());
    else if (k == "--groups") {
      std::istringstream in(v);
      std::string g;
      while (std::getline(in, g, ','))
        a->groups.push_back(static_cast<gid_t>(std::atoll(g.c_str())));
    } else
      return false;
  }
  for (; i < argc; ++i) a->sshd.push_back(argv[i]);
  return !a->socket.empty() && a->socket[0] == '/' && !a->user.empty() &&
         !a->containerState.empty() && !a->containerConfig.empty() && !a->sshd.empty() &&
         a->sshd[0][0] == '/' && (a->uid < 0) == (a->gid < 0) && a->uid != 0 && a->gid != 0;
}

// A root-owned file read whole, following no link at its last step.
bool readRootFile(const std::string& path, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool ok =
      ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 && st.st_size < (16 << 20);
  out->clear();
  char buf[65536];
  for (ssize_t n; ok && (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      ok = false;
    else
      out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return ok;
}

// The fields of a /proc/PID/stat text after the command's name: state first (field 3).
std::vector<std::string> statFieldsAfterName(const std::string& text) {
  std::vector<std::string> fields;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return fields;
  std::istringstream in(text.substr(close + 1));
  for (std::string f; in >> f;) fields.push_back(f);
  return fields;
}

uint64_t startTimeOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  return allot::agent::statStartTime(text);
}

void say(int fd, const std::string& line) {
  const std::string text = "allot: " + line + "\n";
  [[maybe_unused]] auto n = ::write(fd, text.data(), text.size());
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

// The login's process, from fork to exec: everything after the fork fails by writing to the
// login's stderr and exiting 126 (127: no shell). Runs as root until setuid. `program` is the
// host's sftp-server for the sftp subsystem, else "" (the login's shell or command).
[[noreturn]] void becomeLogin(const ContainerProcess& c, const LoginRequest& request,
                              const std::string& user, const int fds[3],
                              const std::string& program) {
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int i = 0; i < 3; ++i) {
    if (::dup2(fds[i], i) < 0) ::_exit(126);
  }
  ::syscall(SYS_close_range, 3, ~0U, 0);
  auto fail = [](const std::string& what) {
    say(2, "cannot log in to the session's container: " + what + ": " + std::strerror(errno));
    ::_exit(126);
  };
  if (::setsid() < 0) fail("setsid");
  if (request.tty) {
    // The terminal is the caller's own (checked before the fork): taken over from its session.
    if (::ioctl(0, TIOCSCTTY, 1) != 0) fail("the terminal");
    if (::tcsetpgrp(0, ::getpid()) != 0) fail("the terminal's foreground");
  }
  const std::string shell = ::access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh";
  std::vector<std::string> env = allot::agent::loginEnvironment(c, request, user, shell);
  std::vector<std::string> args = program.empty() ? allot::agent::loginArgv(shell, request.command)
                                                  : std::vector<std::string>{"sftp-server"};
  const std::string& path = program.empty() ? shell : program;
  std::string home = c.cwd;
  for (const auto& e : env) {
    if (e.rfind("HOME=", 0) == 0) home = e.substr(5);
  }
  // No capability survives, in any set; then the container's identity.
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (::setgroups(c.groups.size(), c.groups.data()) != 0) fail("setgroups");
  if (::setgid(c.gid) != 0) fail("setgid");
  if (::setuid(c.uid) != 0) fail("setuid");
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capset, &header, data) != 0) fail("capset");
  if (::chdir(home.c_str()) != 0 && ::chdir(c.cwd.c_str()) != 0 && ::chdir("/") != 0) fail("chdir");
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("no_new_privs");
  if (!c.seccompBpf.empty()) {
    sock_fprog program{static_cast<unsigned short>(c.seccompBpf.size() / sizeof(sock_filter)),
                       reinterpret_cast<sock_filter*>(const_cast<char*>(c.seccompBpf.data()))};
    if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) != 0) fail("seccomp");
  }
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  ::execve(path.c_str(), argv.data(), envp.data());
  say(2, "cannot run " + path + " for the session's container: " + std::strerror(errno));
  ::_exit(127);
}

// One login, in a process of its own (root): joins the container, runs the login in a child,
// waits for it (a caller that hangs up is a hangup for the login), and writes its exit code to
// `conn`. Returns the code for the process's own exit.
int serveLogin(const ServeArgs& args, int conn, pid_t peer, const LoginRequest& request,
               const int fds[3]) {
  auto refuse = [&](const std::string& why) {
    say(fds[2], "cannot log in to the session's container: " + why);
    const int code = 1;
    [[maybe_unused]] auto n = ::send(conn, &code, sizeof code, MSG_NOSIGNAL);
    return 1;
  };
  std::string state, config;
  if (!readRootFile(args.containerState, &state) || !readRootFile(args.containerConfig, &config))
    return refuse("its container is not running");
  auto c = allot::agent::parseContainerProcess(state, config);
  if (!c.ok()) return refuse(c.status().message());
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, c->pid, 0));
  // Opened first, then checked: the pidfd holds the process that had the container's start time.
  if (pidfd < 0 || (c->startTime != 0 && startTimeOf(c->pid) != c->startTime))
    return refuse("its container is not running");
  if (request.tty) {
    // The caller's controlling terminal (field 7 of its stat), and no other: a terminal taken
    // over with root's TIOCSCTTY must not be someone else's that the caller holds open.
    struct stat st {};
    std::ifstream in("/proc/" + std::to_string(peer) + "/stat");
    const std::string stat((std::istreambuf_iterator<char>(in)), {});
    const auto fields = statFieldsAfterName(stat);
    if (!::isatty(fds[0]) || ::fstat(fds[0], &st) != 0 || !S_ISCHR(st.st_mode) ||
        fields.size() < 5 || fields[4] != std::to_string(st.st_rdev))
      return refuse("the terminal is not the login's own");
  }
  const bool sftp = request.command == "internal-sftp" && !args.sftp.empty();
  if (!sftp && ::setns(pidfd, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC) != 0)
    return refuse(std::string("cannot join its namespaces: ") + std::strerror(errno));
  ::close(pidfd);
  const pid_t login = ::fork();
  if (login == 0) becomeLogin(*c, request, args.user, fds, sftp ? args.sftp : "");
  for (int i = 0; i < 3; ++i) ::close(fds[i]);
  if (login < 0) return refuse("fork failed");
  const int loginFd = static_cast<int>(::syscall(SYS_pidfd_open, login, 0));
  int status = 0;
  for (bool hungUp = false; loginFd >= 0;) {
    pollfd p[2] = {{loginFd, POLLIN, 0}, {conn, POLLRDHUP, 0}};
    if (::poll(p, hungUp ? 1 : 2, -1) < 0 && errno != EINTR) break;
    if (p[0].revents != 0) break;
    if (!hungUp && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
      hungUp = true;  // as when a terminal hangs up: the login's session gets SIGHUP
      ::kill(-login, SIGHUP);
      ::kill(-login, SIGCONT);
    }
  }
  while (::waitpid(login, &status, 0) < 0 && errno == EINTR) {
  }
  const int code = exitCodeOf(status);
  [[maybe_unused]] auto n = ::send(conn, &code, sizeof code, MSG_NOSIGNAL);
  return 0;
}

// Receives one login from an accepted connection and forks its server.
void acceptLogin(const ServeArgs& args, int listener, uid_t owner) {
  const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return;
  ucred peer{};
  socklen_t len = sizeof peer;
  if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != owner) {
    ::close(conn);
    return;
  }
  std::string text(allot::agent::kMaxLoginRequest, '\0');
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
  iovec iov{text.data(), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
  int fds[3] = {-1, -1, -1};
  int received = 0;
  for (cmsghdr* h = CMSG_FIRSTHDR(&msg); n >= 0 && h != nullptr; h = CMSG_NXTHDR(&msg, h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
      if (received < 3)
        fds[received++] = fd;
      else
        ::close(fd);
    }
  }
  auto request = allot::agent::decodeLoginRequest(
      n > 0 && !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? text.substr(0, n) : "");
  if (received == 3 && request.ok()) {
    const pid_t server = ::fork();
    if (server == 0) {
      ::close(listener);
      ::_exit(serveLogin(args, conn, peer.pid, *request, fds));
    }
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  ::close(conn);
}

int serve(int argc, char** argv) {
  ServeArgs args;
  if (!parseServe(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: allot-ssh-bridge serve --socket PATH --user NAME "
                 "--container-state FILE --container-config FILE [--uid U --gid G "
                 "[--groups G,...]] -- SSHD [ARG]...\n");
    return 2;
  }
  const uid_t owner = args.uid >= 0 ? static_cast<uid_t>(args.uid) : ::geteuid();
  const gid_t ownerGid = args.gid >= 0 ? static_cast<gid_t>(args.gid) : ::getegid();
  const int listener = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (listener < 0 || args.socket.size() >= sizeof addr.sun_path) return 1;
  std::memcpy(addr.sun_path, args.socket.c_str(), args.socket.size() + 1);
  ::unlink(args.socket.c_str());
  const mode_t oldMask = ::umask(0177);
  const bool bound = ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::umask(oldMask);
  // The directory is root's alone: nothing can replace the socket between bind and lchown.
  if (!bound || ::lchown(args.socket.c_str(), owner, ownerGid) != 0 ||
      ::listen(listener, 16) != 0) {
    std::fprintf(stderr, "allot-ssh-bridge: cannot listen on %s: %s\n", args.socket.c_str(),
                 std::strerror(errno));
    return 1;
  }
  std::vector<char*> sshdArgv;
  for (auto& a : args.sshd) sshdArgv.push_back(a.data());
  sshdArgv.push_back(nullptr);
  const pid_t sshd = ::fork();
  if (sshd == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a bridge that is killed takes its sshd along
    if (args.uid >= 0 && (::setgroups(args.groups.size(), args.groups.data()) != 0 ||
                          ::setgid(static_cast<gid_t>(args.gid)) != 0 ||
                          ::setuid(static_cast<uid_t>(args.uid)) != 0))
      ::_exit(126);
    ::execve(sshdArgv[0], sshdArgv.data(), environ);
    ::_exit(127);
  }
  if (sshd < 0) return 1;
  const int sshdFd = static_cast<int>(::syscall(SYS_pidfd_open, sshd, 0));
  int status = 0;
  for (;;) {
    pollfd p[2] = {{listener, POLLIN, 0}, {sshdFd, POLLIN, 0}};
    // Login servers are reaped here; a second's wait bounds how long one stays a zombie.
    const int ready = ::poll(p, 2, 1000);
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (ready < 0 && errno != EINTR) break;
    if (p[0].revents & POLLIN) acceptLogin(args, listener, owner);
    if (sshdFd < 0 || p[1].revents != 0) break;
  }
  ::waitpid(sshd, &status, 0);
  ::unlink(args.socket.c_str());
  for (const auto& f : args.cleanup) ::unlink(f.c_str());
  return exitCodeOf(status);
}

int enter(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: allot-ssh-bridge enter SOCKET\n");
    return 2;
  }
  const std::string socketPath = argv[2];
  LoginRequest request;
  if (const char* c = std::getenv("SSH_ORIGINAL_COMMAND")) request.command = c;
  request.tty = ::isatty(0);
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos && allot::agent::loginVariable(entry.substr(0, eq)))
      request.env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  const std::string text = allot::agent::encodeLoginRequest(request);
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (fd < 0 || socketPath.size() >= sizeof addr.sun_path ||
      text.size() > allot::agent::kMaxLoginRequest) {
    say(2, "cannot reach the session's container");
    return 255;
  }
  std::memcpy(addr.sun_path, socketPath.c_str(), socketPath.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    say(2, "cannot reach the session's container: " + std::string(std::strerror(errno)));
    return 255;
  }
  // The terminal goes to root's bridge only, never to whoever else could listen there.
  ucred server{};
  socklen_t len = sizeof server;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &server, &len) != 0 || server.uid != 0) {
    say(2, "the session's login socket is not the agent's; refusing it");
    return 255;
  }
  const int stdio[3] = {0, 1, 2};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof stdio)] = {};
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* h = CMSG_FIRSTHDR(&msg);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof stdio);
  std::memcpy(CMSG_DATA(h), stdio, sizeof stdio);
  if (::sendmsg(fd, &msg, MSG_NOSIGNAL) < 0) {
    say(2, "cannot reach the session's container: " + std::string(std::strerror(errno)));
    return 255;
  }
  // The login now holds the terminal; this process only waits for its status.
  int code = 255;
  ssize_t n;
  do {
    n = ::recv(fd, &code, sizeof code, 0);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof code)) {
    say(2, "the session's container closed the login");
    return 255;
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "serve") == 0) {
    // Root: nothing of the environment it was started with is used but passed to sshd, which
    // the agent gave a fixed one.
    return serve(argc, argv);
  }
  if (argc > 1 && std::strcmp(argv[1], "enter") == 0) return enter(argc, argv);
  std::fprintf(stderr, "usage: allot-ssh-bridge serve ... | enter SOCKET\n");
  return 2;
}
