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
// serves logins until SSHD exits, then removes PATH and each --cleanup FILE. A connection is
// served from the owner only (SO_PEERCRED), at most 32 at once, each by a process of its own that
// receives the login, joins the container (below), and answers with the login's exit status and
// what went wrong, if anything: root never writes to the descriptors the owner sent.
//
//   allot-ssh-bridge enter SOCKET
// sshd's ForceCommand (`exec`'d, so it is the login's session leader), as the owner: when its
// input is a terminal it gives the terminal up (TIOCNOTTY), then sends its standard descriptors
// and the LoginRequest to SOCKET (only when root listens there), and exits with the status that
// comes back, printing the bridge's message.
//
// The sftp subsystem (the command "internal-sftp") runs SFTP_SERVER on the host, not in the
// container, whose image need not have one: as the container's user (never root), with the same
// capabilities (none), no new privileges and seccomp program, starting in the session's home. It
// sees the host's files as that user may, as the owner's jobs without an image do; the session's
// storage is mounted at the same path in the container, so it serves the same files.
//
// Joining the container, as crun's exec would: the process named by crun's state, held by a
// pidfd and checked by its start time, gives its mount, PID and IPC namespaces (setns); the login
// then runs in a child (the new PID namespace's member) in a session of its own, and drops every
// capability from every set and takes the container's user and groups; only then, by the
// kernel's rules for a plain user, does it make its terminal the controlling one (the owner's
// side gave it up), then no new privileges and the container's seccomp program, and it runs the
// shell the image has (bash, else sh).

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
#include <sstream>
#include <string>
#include <vector>

#include "agent/exec/proc.h"
#include "agent/session/container_login.h"
#include "common/fd_passing.h"

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

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

// The answer to a login: its exit code, then what to tell its user (the owner's side prints
// it). Root never writes to the descriptors the owner sent: they may be anything.
void answer(int conn, int code, const std::string& message = "") {
  std::string reply(sizeof code, '\0');
  std::memcpy(reply.data(), &code, sizeof code);
  reply += message;
  [[maybe_unused]] auto n = ::send(conn, reply.data(), reply.size(), MSG_NOSIGNAL);
}

// The most login servers one bridge runs at once: each is a root process.
constexpr int kMaxLogins = 32;

// Tells the owner's side why the login could not start, on its error pipe, and ends.
[[noreturn]] void failLogin(int errFd, const std::string& what) {
  const std::string text = what + ": " + std::strerror(errno);
  [[maybe_unused]] auto n = ::write(errFd, text.data(), text.size());
  ::_exit(126);
}

// The login's process, from fork to exec. A failure is written to `errFd` (close-on-exec: the
// parent reads end-of-file once the exec succeeded) and exits 126. Runs as root until setuid;
// every call on the owner's descriptors before then is a dup2. `program` is the host's
// sftp-server for the sftp subsystem, else "" (the login's shell or command).
[[noreturn]] void becomeLogin(const ContainerProcess& c, const LoginRequest& request,
                              const std::string& user, const int fds[3], int errFd,
                              const std::string& program) {
  auto fail = [&errFd](const std::string& what) { failLogin(errFd, what); };
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // The error pipe goes to 3, the owner's descriptors to 0..2, nothing else stays.
  int err = ::fcntl(errFd, F_DUPFD_CLOEXEC, 10);
  if (err < 0) fail("the error pipe");
  for (int i = 0; i < 3; ++i) {
    if (::dup2(fds[i], i) < 0) fail("dup2");
  }
  if (::dup3(err, 3, O_CLOEXEC) < 0) fail("dup3");
  errFd = 3;
  if (::syscall(SYS_close_range, 4, ~0U, 0) != 0) fail("close_range");
  if (::setsid() < 0) fail("setsid");
  const std::string shell = ::access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh";
  std::vector<std::string> env = allot::agent::loginEnvironment(c, request, user, shell);
  std::vector<std::string> args = program.empty() ? allot::agent::loginArgv(shell, request.command)
                                                  : std::vector<std::string>{"sftp-server"};
  const std::string& path = program.empty() ? shell : program;
  std::string home = c.cwd;
  for (const auto& e : env) {
    if (e.rfind("HOME=", 0) == 0) home = e.substr(5);
  }
  // No capability survives, in any set (every one this kernel knows: EINVAL past the last);
  // then the container's identity.
  for (int cap = 0; cap < 64; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) fail("PR_CAPBSET_DROP");
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) fail("PR_CAP_AMBIENT");
  if (::setgroups(c.groups.size(), c.groups.data()) != 0) fail("setgroups");
  if (::setgid(c.gid) != 0) fail("setgid");
  if (::setuid(c.uid) != 0) fail("setuid");
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capset, &header, data) != 0) fail("capset");
  if (request.tty) {
    // As the user, by the kernel's rules: only a terminal that is no session's controlling one
    // (the owner's side gave its own up) can become the login's.
    if (::ioctl(0, TIOCSCTTY, 0) != 0) fail("the terminal");
    if (::tcsetpgrp(0, ::getpid()) != 0) fail("the terminal's foreground");
  }
  if (::chdir(home.c_str()) != 0 && ::chdir(c.cwd.c_str()) != 0 && ::chdir("/") != 0) fail("chdir");
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("no_new_privs");
  if (!c.seccompBpf.empty()) {
    sock_fprog filter{static_cast<unsigned short>(c.seccompBpf.size() / sizeof(sock_filter)),
                      reinterpret_cast<sock_filter*>(const_cast<char*>(c.seccompBpf.data()))};
    if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter, 0, 0) != 0) fail("seccomp");
  }
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  ::execve(path.c_str(), argv.data(), envp.data());
  failLogin(errFd, "cannot run " + path);
}

// Receives one login from `conn` (the owner's, checked by the caller): its request and its three
// descriptors; an error when it is not exactly that within a few seconds.
allot::Result<LoginRequest> receiveLogin(int conn, int fds[3]) {
  timeval wait{10, 0};
  ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  std::string text(allot::agent::kMaxLoginRequest, '\0');
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
  iovec iov{text.data(), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
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
  if (n <= 0 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || received != 3)
    return allot::Status::InvalidArgument("malformed login");
  return allot::agent::decodeLoginRequest(text.substr(0, static_cast<size_t>(n)));
}

// One login, in a process of its own (root): receives it, joins the container, runs the login
// in a child, waits for it (a caller that hangs up is a hangup for the login), and answers with
// its exit code on `conn`.
int serveLogin(const ServeArgs& args, int conn) {
  int fds[3] = {-1, -1, -1};
  auto request = receiveLogin(conn, fds);
  if (!request.ok()) return 1;  // not the owner's side: nobody to tell
  const std::string refused = "cannot log in to the session's container: ";
  std::string state, config;
  if (!readRootFile(args.containerState, &state) || !readRootFile(args.containerConfig, &config))
    return answer(conn, 1, refused + "it is not running"), 1;
  auto c = allot::agent::parseContainerProcess(state, config);
  if (!c.ok()) return answer(conn, 1, refused + c.status().message()), 1;
  // The container's user is the session's owner: never root (an agent runs images only when
  // workloads run as their owners), and a root login on the host's files (sftp) is refused.
  if (c->uid == 0 || c->gid == 0) return answer(conn, 1, refused + "its container runs as root"), 1;
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, c->pid, 0));
  // Opened first, then checked: the pidfd holds the process that had the container's start time.
  if (pidfd < 0 || c->startTime == 0 || !allot::agent::sameLiveProcess(c->pid, c->startTime))
    return answer(conn, 1, refused + "it is not running"), 1;
  const bool sftp = request->command == "internal-sftp" && !args.sftp.empty();
  if (!sftp && ::setns(pidfd, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC) != 0)
    return answer(conn, 1, refused + "cannot join its namespaces: " + std::strerror(errno)), 1;
  ::close(pidfd);
  int errPipe[2];
  if (::pipe2(errPipe, O_CLOEXEC) != 0) return answer(conn, 1, refused + "pipe failed"), 1;
  const pid_t login = ::fork();
  if (login == 0) {
    ::close(errPipe[0]);
    ::close(conn);
    becomeLogin(*c, *request, args.user, fds, errPipe[1], sftp ? args.sftp : "");
  }
  ::close(errPipe[1]);
  for (int fd : fds) ::close(fd);
  if (login < 0) return answer(conn, 1, refused + "fork failed"), 1;
  std::string failed;
  char buf[512];
  for (ssize_t n; (n = ::read(errPipe[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    failed.append(buf, static_cast<size_t>(n));
  }
  ::close(errPipe[0]);
  const int loginFd = static_cast<int>(::syscall(SYS_pidfd_open, login, 0));
  int status = 0;
  for (bool hungUp = false; loginFd >= 0 && failed.empty();) {
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
  if (!failed.empty()) return answer(conn, 126, refused + failed), 0;
  answer(conn, exitCodeOf(status));
  return 0;
}

// Accepts one connection and forks its login server; a connection from anyone but the owner,
// or past kMaxLogins at once, is closed unanswered.
void acceptLogin(const ServeArgs& args, int listener, uid_t owner, int* running) {
  const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return;
  ucred peer{};
  socklen_t len = sizeof peer;
  if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 && peer.uid == owner &&
      *running < kMaxLogins) {
    const pid_t server = ::fork();
    if (server == 0) {
      ::close(listener);
      ::_exit(serveLogin(args, conn));
    }
    if (server > 0) ++*running;
  }
  ::close(conn);
}

int serve(int argc, char** argv) {
  ServeArgs args;
  if (!parseServe(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: allot-ssh-bridge serve --socket PATH --user NAME "
                 "--container-state FILE --container-config FILE [--uid U --gid G "
                 "[--groups G,...]] [--sftp SFTP_SERVER] [--cleanup FILE]... -- SSHD [ARG]...\n");
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
  const pid_t bridge = ::getpid();
  const pid_t sshd = ::fork();
  if (sshd == 0) {
    if (args.uid >= 0 && (::setgroups(args.groups.size(), args.groups.data()) != 0 ||
                          ::setgid(static_cast<gid_t>(args.gid)) != 0 ||
                          ::setuid(static_cast<uid_t>(args.uid)) != 0))
      ::_exit(126);
    // After the switch, which clears it: a bridge that is killed takes its sshd along.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != bridge) ::_exit(1);
    ::execve(sshdArgv[0], sshdArgv.data(), environ);
    ::_exit(127);
  }
  if (sshd < 0) return 1;
  const int sshdFd = static_cast<int>(::syscall(SYS_pidfd_open, sshd, 0));
  int status = 0, running = 0;
  for (bool sshdDone = sshdFd < 0; !sshdDone;) {
    pollfd p[2] = {{listener, POLLIN, 0}, {sshdFd, POLLIN, 0}};
    // Login servers are reaped here; a second's wait bounds how long one stays a zombie.
    const int ready = ::poll(p, 2, 1000);
    int childStatus = 0;
    for (pid_t child; (child = ::waitpid(-1, &childStatus, WNOHANG)) > 0;) {
      if (child == sshd) {
        sshdDone = true;
        status = childStatus;
      } else {
        --running;
      }
    }
    if (ready < 0 && errno != EINTR) break;
    if (!sshdDone && (p[0].revents & POLLIN)) acceptLogin(args, listener, owner, &running);
  }
  if (sshdFd < 0) ::waitpid(sshd, &status, 0);
  ::unlink(args.socket.c_str());
  for (const auto& f : args.cleanup) ::unlink(f.c_str());
  return exitCodeOf(status);
}

// The owner's side prints to its own stderr.
void say(const std::string& line) {
  const std::string text = "allot: " + line + "\n";
  [[maybe_unused]] auto n = ::write(2, text.data(), text.size());
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
  if (request.tty) {
    // sshd made this process the terminal's session leader; it gives the terminal up so that the
    // login can take it as a plain user may (TIOCSCTTY without force). That hangs up this
    // process's own group, which ignores it.
    ::signal(SIGHUP, SIG_IGN);
    if (::ioctl(0, TIOCNOTTY) != 0) {
      say("cannot hand the terminal to the session's container: " +
          std::string(std::strerror(errno)));
      return 255;
    }
  }
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
    say("cannot reach the session's container");
    return 255;
  }
  std::memcpy(addr.sun_path, socketPath.c_str(), socketPath.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    say("cannot reach the session's container: " + std::string(std::strerror(errno)));
    return 255;
  }
  // The terminal goes to root's bridge only, never to whoever else could listen there.
  ucred server{};
  socklen_t len = sizeof server;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &server, &len) != 0 || server.uid != 0) {
    say("the session's login socket is not the agent's; refusing it");
    return 255;
  }
  const int stdio[3] = {0, 1, 2};
  if (allot::sendWithDescriptors(fd, text, stdio, MSG_NOSIGNAL) < 0) {
    say("cannot reach the session's container: " + std::string(std::strerror(errno)));
    return 255;
  }
  // The login now holds the terminal; this process only waits for its status.
  std::string reply(4096, '\0');
  ssize_t n;
  do {
    n = ::recv(fd, reply.data(), reply.size(), 0);
  } while (n < 0 && errno == EINTR);
  int code = 255;
  if (n < static_cast<ssize_t>(sizeof code)) {
    say("the session's container closed the login");
    return 255;
  }
  std::memcpy(&code, reply.data(), sizeof code);
  if (n > static_cast<ssize_t>(sizeof code))
    say(reply.substr(sizeof code, static_cast<size_t>(n) - sizeof code));
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
