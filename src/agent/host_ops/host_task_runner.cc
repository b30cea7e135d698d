#include "agent/host_ops/host_task_runner.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

#include "agent/exec/output_tail.h"

namespace allot::agent {
namespace {

// The task's combined output: all of it to the file as it comes, its tail kept for the result.
class Output {
 public:
  explicit Output(const std::string& path) {
    if (path.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  }
  ~Output() {
    if (fd_ >= 0) ::close(fd_);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  void add(std::string_view s) {
    if (fd_ >= 0) {
      // Best effort: a full disk must not fail the task; the result still carries the output.
      for (size_t done = 0; done < s.size();) {
        ssize_t n = ::write(fd_, s.data() + done, s.size() - done);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
      }
    }
    tail_.add(s);
  }
  std::string take() { return tail_.take(); }

 private:
  int fd_ = -1;
  OutputTail tail_{kMaxHookOutput};
};

std::string firstLine(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  return line.empty() ? "killed by a signal" : line;
}

}  // namespace

model::HostTaskResult runHostTask(const model::HostTask& task, HostTaskContext ctx) {
  model::HostTaskResult r;
  r.id = task.id;
  Output out(ctx.outputFile);
  auto sink = [&out](std::string_view s) { out.add(s); };
  auto failAt = [&](const char* step, std::string reason) {
    r.failedStep = step;
    r.reason = std::move(reason);
    out.add("== " + std::string(step) + " failed: " + r.reason + "\n");
    r.output = out.take();
    return r;
  };
  out.add("== host task " + std::to_string(task.id) + " (" + task.purpose + ")\n");
  if (task.wipe) {
    out.add("== wipe\n");
    ctx.wipe.step = *task.wipe;
    WipeResult w = runWipe(ctx.wipe, sink);
    if (!w.ok) return failAt("wipe", w.reason);
  }
  if (task.hook) {
    out.add("== hook " + task.hook->kind + " " + task.hook->path + "\n");
    ctx.hook.spec = *task.hook;
    size_t streamed = 0;
    ctx.hook.onOutput = [&](std::string_view s) {
      streamed += s.size();
      out.add(s);
    };
    r.hook = runHook(ctx.hook);
    // A hook that could not start said why in its result only.
    if (streamed == 0) out.add(r.hook->output);
    if (!r.hook->ok) {
      return failAt("hook", r.hook->timedOut
                                ? "timed out after " + std::to_string(task.hook->timeoutMs) + " ms"
                            : r.hook->exitCode >= 0
                                ? "exited with status " + std::to_string(r.hook->exitCode)
                                : firstLine(r.hook->output));
    }
  }
  if (task.health) {
    out.add("== health check\n");
    ctx.health.step = *task.health;
    r.health = runHealthCheck(ctx.health, sink);
    if (!r.health->problems.empty()) {
      std::string reason = r.health->problems.front();
      if (r.health->problems.size() > 1)
        reason += " (and " + std::to_string(r.health->problems.size() - 1) + " more)";
      return failAt("health", reason);
    }
  }
  r.ok = true;
  out.add("== host task " + std::to_string(task.id) + " succeeded\n");
  r.output = out.take();
  return r;
}

}  // namespace allot::agent
