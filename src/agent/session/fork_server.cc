#include "agent/session/fork_server.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

namespace allot::agent {

namespace {

// A server that lived this long was healthy: its next failure starts the back-off over.
constexpr int64_t kHealthyMs = 60'000;
constexpr int64_t kMaxBackoffMs = 300'000;

}  // namespace

ForkServerProcess::ForkServerProcess(std::string program, std::string socket, std::string jobsDir,
                                     const Clock& clock)
    : program_(std::move(program)),
      socket_(std::move(socket)),
      jobsDir_(std::move(jobsDir)),
      clock_(clock) {}

ForkServerProcess::~ForkServerProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);
}

void ForkServerProcess::keepRunning() {
  const TimeMs now = clock_.nowMs();
  if (pid_ > 0) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == 0) return;  // running
    pid_ = -1;
    if (now - startedAt_ >= kHealthyMs) backoffMs_ = 1000;
    nextStart_ = now + backoffMs_;
    spdlog::warn("Jupyter fork server ended ({} {}); restarting in {} ms",
                 WIFEXITED(status) ? "exit code" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), backoffMs_);
    backoffMs_ = std::min(backoffMs_ * 2, kMaxBackoffMs);
    return;
  }
  if (now < nextStart_) return;

  std::error_code ec;
  const std::string dir = std::filesystem::path(socket_).parent_path().string();
  std::filesystem::create_directories(dir, ec);
  // Session clients run as their owners and must reach the socket; the server tells them apart
  // by their peer credentials and the agent's job records, not by who may open it.
  ::chmod(dir.c_str(), 0711);
  std::vector<std::string> args = {program_, "serve", "--socket", socket_, "--jobs-dir", jobsDir_};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // A neutral environment: a value a module captures at import must not point into root's home
  // in a user's session (docs/design/sessions.md, 2.3 pitfall 4).
  std::vector<std::string> envs = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent",
                                   "LANG=C.UTF-8"};
  std::vector<char*> envp;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    spdlog::warn("cannot start the Jupyter fork server: fork failed");
    nextStart_ = now + backoffMs_;
    return;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(0);  // the agent died before the prctl
    ::setpgid(0, 0);                        // the agent's terminal's signals are not its own
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  pid_ = pid;
  startedAt_ = now;
  spdlog::info("Jupyter fork server starting: pid={} socket={}", pid_, socket_);
}

}  // namespace allot::agent
