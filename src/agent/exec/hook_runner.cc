#include "agent/exec/hook_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "agent/exec/output_tail.h"

namespace allot::agent {
namespace fs = std::filesystem;

namespace {

using SteadyClock = std::chrono::steady_clock;

// After the timeout kills the group, what is still in the pipe is read for this long at most: a
// grandchild that left the group may hold the pipe open for ever.
constexpr int kDrainAfterKillMs = 1000;

std::string findOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

bool writeFile(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
  return static_cast<bool>(out);
}

model::HookResult failed(int64_t id, std::string why) {
  model::HookResult r;
  r.id = id;
  r.output = std::move(why) + "\n";
  return r;
}

// ALLOT_HOST=... from allot_host, for scripts.
std::string envName(const std::string& var) {
  std::string out;
  for (char c : var) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

model::HookResult runHook(const HookRun& run) {
  const model::HookSpec& spec = run.spec;
  std::error_code ec;
  fs::create_directories(fs::path(run.runDir) / "tmp", ec);
  if (ec) return failed(spec.id, "cannot create " + run.runDir + ": " + ec.message());
  const fs::path inventory = fs::path(run.runDir) / "inventory.ini";
  const fs::path varsFile = fs::path(run.runDir) / "vars.json";
  // One host, this one, reached without ssh; the system python so that no virtualenv of the
  // agent's leaks into the modules.
  if (!writeFile(inventory,
                 "[allot]\nlocalhost ansible_connection=local "
                 "ansible_python_interpreter=/usr/bin/python3\n") ||
      !writeFile(varsFile, run.vars.dump(2) + "\n"))
    return failed(spec.id, "cannot write the hook's inventory and vars in " + run.runDir);
  if (::access(spec.path.c_str(), R_OK) != 0)
    return failed(spec.id, "hook " + spec.kind + " '" + spec.path + "': " + std::strerror(errno));

  std::vector<std::string> argv;
  if (spec.kind == "playbook") {
    std::string ansible = findOnPath("ansible-playbook");
    if (ansible.empty())
      return failed(spec.id,
                    "ansible-playbook not found on PATH (Debian: apt install ansible-core)");
    argv = {ansible,   "-i", inventory.string(),     "-c", "local",
            spec.path, "-e", "@" + varsFile.string()};
  } else {
    argv = {spec.path};
  }

  // The environment, built before the fork: ansible's temp files stay in the run dir (the agent's
  // HOME may not be writable), no colour codes in the stored output.
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  const std::string tmp = (fs::path(run.runDir) / "tmp").string();
  for (const auto& kv :
       {"ANSIBLE_LOCAL_TEMP=" + tmp, "ANSIBLE_REMOTE_TEMP=" + tmp, std::string("ANSIBLE_NOCOLOR=1"),
        std::string("ANSIBLE_FORCE_COLOR=0"), std::string("ANSIBLE_RETRY_FILES_ENABLED=0"),
        std::string("PYTHONUNBUFFERED=1"), "ALLOT_HOOK_VARS=" + varsFile.string()})
    env.push_back(kv);
  for (const auto& [k, v] : run.vars.items())
    env.push_back(envName(k) + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return failed(spec.id, std::string("cannot make a pipe: ") + std::strerror(errno));
  const int devNull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    if (devNull >= 0) ::close(devNull);
    return failed(spec.id, std::string("cannot fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Async-signal-safe calls only from here to exec.
    ::setpgid(0, 0);
    if (devNull >= 0) ::dup2(devNull, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::chdir(run.runDir.c_str());
    ::execve(cargv[0], cargv.data(), cenv.data());
    static const char msg[] = "cannot execute the hook\n";
    ::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so the group exists before the timeout can signal it
  ::close(fds[1]);
  if (devNull >= 0) ::close(devNull);

  OutputTail out(kMaxHookOutput);
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(spec.timeoutMs);
  auto drainUntil = SteadyClock::time_point::max();
  bool timedOut = false;
  char buf[16384];
  for (;;) {
    const auto now = SteadyClock::now();
    if (!timedOut && now >= deadline) {
      timedOut = true;
      ::kill(-pid, SIGKILL);
      drainUntil = now + std::chrono::milliseconds(kDrainAfterKillMs);
    }
    if (now >= drainUntil) break;
    const auto until = timedOut ? drainUntil : deadline;
    const auto waitMs =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
    pollfd p{fds[0], POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(waitMs, 1000)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: every writer is gone
    const std::string_view piece(buf, static_cast<size_t>(n));
    out.add(piece);
    if (run.onOutput) run.onOutput(piece);
  }
  ::close(fds[0]);
  // The hook's own process may outlive its output (it closed stdout); the timeout still holds.
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(pid, &status, timedOut ? 0 : WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (w == 0) {
      if (SteadyClock::now() >= deadline) {
        timedOut = true;
        ::kill(-pid, SIGKILL);
        continue;
      }
      ::usleep(10'000);
    }
  }
  model::HookResult r;
  r.id = spec.id;
  r.timedOut = timedOut;
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.ok = !timedOut && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  r.output = out.take();
  if (timedOut) {
    const std::string note =
        "[allot: killed after the timeout of " + std::to_string(spec.timeoutMs) + " ms]\n";
    r.output += note;
    if (run.onOutput) run.onOutput(note);
  }
  return r;
}

}  // namespace allot::agent
