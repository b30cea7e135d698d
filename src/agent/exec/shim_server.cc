#include "agent/exec/shim_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/fd_passing.h"
#include "common/log.h"

namespace allot::agent {
namespace {

// The server's end of its socket, in the server.
constexpr int kServerFd = 3;

// How long the destructor waits for a killed server to exit before leaving it to init.
constexpr int kExitWaitMs = 1'000;

// True once pid was reaped here or is not ours to reap.
bool reapedNow(pid_t pid) {
  int status;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  return r == pid || r < 0;
}

// Up to the first NUL (a /proc file), through a descriptor opened close-on-exec: a
// std::ifstream's would pass to a process another thread spawns meanwhile.
std::string readSmallFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text.substr(0, text.find('\0'));
}

}  // namespace

std::vector<pid_t> strayShims(const std::vector<pid_t>& known) {
  std::vector<pid_t> out;
  std::error_code ec;
  // Every thread's children: a CLONE_PARENT child is the child of the thread that spawned the
  // server.
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::istringstream children(readSmallFile(task.path().string() + "/children"));
    for (pid_t pid; children >> pid;) {
      if (std::find(known.begin(), known.end(), pid) != known.end()) continue;
      // A zombie keeps its command name; another thread's children (hooks, image tools) are
      // other programs.
      if (readSmallFile("/proc/" + std::to_string(pid) + "/comm") == "allot-job-shim\n")
        out.push_back(pid);
    }
  }
  return out;
}

Result<pid_t> spawnShimProcess(const std::vector<std::string>& argv, int childEnd, int childFd) {
  std::vector<std::string> strings = argv;
  std::vector<char*> args;
  for (auto& s : strings) args.push_back(s.data());
  args.push_back(nullptr);
  char* noEnvironment[] = {nullptr};
  // Moved above childFd so the dup2 below really clears close-on-exec on the child's copy.
  const int high = ::fcntl(childEnd, F_DUPFD_CLOEXEC, childFd + 1);
  if (high < 0) return Status::Unavailable(std::string("cannot dup: ") + std::strerror(errno));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, high, childFd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A session of its own: the shim outlives the agent and no terminal signal reaches it.
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, &attr, args.data(), noEnvironment);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(high);
  if (rc != 0) return Status::Unavailable(argv[0] + ": cannot run: " + std::strerror(rc));
  return pid;
}

ShimServer::ShimServer(std::string shimPath, const Clock& clock,
                       std::vector<std::string> cgroupBases)
    : shimPath_(std::move(shimPath)), clock_(clock), cgroupBases_(std::move(cgroupBases)) {}

ShimServer::~ShimServer() {
  stop();
  for (int waited = 0; !killed_.empty() && waited < kExitWaitMs; waited += 10) {
    reapKilled();
    if (!killed_.empty()) ::usleep(10'000);
  }
}

void ShimServer::reapKilled() { std::erase_if(killed_, reapedNow); }

Status ShimServer::start() {
  int ends[2];
  // SEQPACKET: one request, one message; the descriptor travels with it.
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) {
    return Status::Unavailable(std::string("cannot create a socket pair: ") + std::strerror(errno));
  }
  std::vector<std::string> argv = {shimPath_, "--server-fd", std::to_string(kServerFd)};
  for (const auto& base : cgroupBases_) {
    argv.push_back("--cgroup-base");
    argv.push_back(base);
  }
  auto pid = spawnShimProcess(argv, ends[1], kServerFd);
  ::close(ends[1]);
  if (!pid.ok()) {
    ::close(ends[0]);
    return pid.status();
  }
  pid_ = *pid;
  socket_ = ends[0];
  return Status::Ok();
}

void ShimServer::stop() {
  if (socket_ >= 0) ::close(socket_);
  socket_ = -1;
  if (pid_ > 0) {
    // Only we can reap it, so the pid is still its own: it exits at end-of-file anyway, but a
    // server stuck or stopped must not hold the agent's exit.
    ::kill(pid_, SIGKILL);
    killed_.push_back(pid_);
    reapKilled();
  }
  pid_ = -1;
}

Result<pid_t> ShimServer::fork(const std::vector<std::string>& args, int childEnd) {
  reapKilled();
  if (pid_ < 0) {
    if (clock_.nowMs() < retryAt_) return Status::Unavailable("no shim server until the retry");
    if (Status st = start(); !st.ok()) {
      spdlog::warn("cannot start the shim server; shims are spawned for {} s: {}", kRetryMs / 1000,
                   st.message());
      retryAt_ = clock_.nowMs() + kRetryMs;
      return st;
    }
  }
  std::string payload;
  for (const auto& a : args) {
    payload += a;
    payload += '\0';
  }
  std::string failure;
  int32_t answer = 0;
  const int fds[] = {childEnd};
  const ssize_t sent = sendWithDescriptors(socket_, payload, fds, MSG_NOSIGNAL);
  if (sent != static_cast<ssize_t>(payload.size())) {
    failure = std::string("cannot send it a request: ") + std::strerror(errno);
  } else {
    pollfd p{socket_, POLLIN, 0};
    int ready;
    do {
      ready = ::poll(&p, 1, kAnswerTimeoutMs);
    } while (ready < 0 && errno == EINTR);
    const ssize_t got = ready > 0 ? ::recv(socket_, &answer, sizeof answer, MSG_DONTWAIT) : -1;
    if (ready == 0) {
      failure = "it did not answer within " + std::to_string(kAnswerTimeoutMs) + " ms";
    } else if (got != sizeof answer) {
      failure = got == 0 ? "it exited" : std::string("cannot read its answer");
    } else if (answer == -EAGAIN || answer == -ENOMEM) {
      // The host is out of processes or memory: a spawn would fail the same way, and the server
      // is fine.
      return Status::Unavailable(std::string("cannot fork a shim: ") + std::strerror(-answer));
    } else if (answer <= 0) {
      failure = "it refused the request: " + std::string(std::strerror(-answer));
    }
  }
  if (!failure.empty()) {
    // A shim it made before it failed, if any, gets end-of-file on childEnd once the caller
    // closes it, and exits; nothing runs in it. The executor reaps it (strayShims).
    if (sent > 0) strayCheckUntil_ = clock_.nowMs() + kRetryMs;
    spdlog::warn("shim server (pid {}) failed, {}; shims are spawned for {} s", pid_, failure,
                 kRetryMs / 1000);
    stop();
    retryAt_ = clock_.nowMs() + kRetryMs;
    return Status::Unavailable("shim server: " + failure);
  }
  return static_cast<pid_t>(answer);
}

}  // namespace allot::agent
