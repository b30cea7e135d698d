// allot host drain|resume|fail|retire|reprovision|log [--follow]: a host's admin state
// (docs/hosts.md) and the record of its transitions. Added under `allot host` by addHostCommands.

#include <chrono>
#include <thread>

#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/confirm_disruption.h"
#include "cli/format.h"
#include "cli/table.h"
#include "common/time_format.h"

namespace allot::cli {
namespace {

struct LifecycleOpts {
  std::string name;
  std::string deadline;
  std::string reason;
  std::string profile;
  std::string timeout;
  bool follow = false;
  bool force = false;  // drain: go on even when the deadline stops running work
};

// How often `host log --follow` asks for more of a running task's output.
constexpr std::chrono::milliseconds kFollowPoll{500};

std::string hostPath(const LifecycleOpts& o, const char* action) {
  return "/hosts/" + urlEncode(o.name) + "/" + action;
}

// "draining (deadline 2026-11-30T12:30:00Z, in 29m): kernel update".
std::string stateLine(const json& h, TimeMs now) {
  std::string out = text(h, "admin_state", "available");
  std::string deadline = text(h, "drain_deadline", "");
  if (out == "draining")
    out += deadline.empty() ? " (no deadline: running work may finish)"
                            : " (deadline " + deadline + ", " + relativeTime(deadline, now) + ")";
  std::string reason = text(h, "admin_reason", "");
  if (!reason.empty()) out += ": " + reason;
  return out;
}

// POST `action` on the host and show the admin state it is in now; `after` follows that line.
int changeState(Context& ctx, const LifecycleOpts& o, const char* action, const json& body,
                const std::string& after = "") {
  return ctx.printReplyLine(ctx.post(hostPath(o, action), body), [&](const json& host) {
    return "Host " + o.name + ": " + stateLine(host, ctx.now()) + after;
  });
}

int drain(Context& ctx, const LifecycleOpts& o) {
  json body = json::object();
  if (!o.deadline.empty()) {
    // Checked here too, so a typo is a usage error before anything is sent.
    auto d = parseDurationMs(o.deadline);
    if (!d.ok()) return ctx.usageError(d.status().withContext("--deadline"));
    body["deadline"] = o.deadline;
  }
  if (!o.reason.empty()) body["reason"] = o.reason;
  if (!o.deadline.empty()) {
    if (auto stop = confirmDisruption(ctx, hostPath(o, "impact") + "?deadline=" +
                                               urlEncode(o.deadline),
                                      "draining " + o.name, o.force))
      return *stop;
  }
  return changeState(ctx, o, "drain", body);
}

int resume(Context& ctx, const LifecycleOpts& o) {
  return changeState(ctx, o, "resume", json::object());
}

int setState(Context& ctx, const LifecycleOpts& o, const char* state) {
  json body = {{"state", state}};
  if (!o.reason.empty()) body["reason"] = o.reason;
  return changeState(ctx, o, "admin-state", body);
}

int reprovision(Context& ctx, const LifecycleOpts& o) {
  json body = json::object();
  if (!o.timeout.empty()) {
    auto d = parseDurationMs(o.timeout);
    if (!d.ok()) return ctx.usageError(d.status().withContext("--timeout"));
    body["timeout"] = o.timeout;
  }
  if (!o.profile.empty()) body["profile"] = o.profile;
  return changeState(
      ctx, o, "reprovision", body,
      "\n(the agent runs the hook; `allot host log " + o.name + "` shows how it ended)");
}

// The transitions after `afterId`, as a table and then each one's output. `streamed` bytes of
// the newest output were already printed as they came (--follow): only the rest is printed.
void printTransitions(Context& ctx, const json& events, int64_t afterId, size_t streamed = 0) {
  Table table({"TIME", "BY", "FROM", "TO", "REASON"});
  for (const auto& e : events) {
    if (e.value("id", int64_t{0}) <= afterId) continue;
    table.addRow({text(e, "at"), text(e, "by"), text(e, "from"), text(e, "to"), text(e, "reason")});
  }
  if (table.empty()) return;
  ctx.out() << table.render();
  // Output of what ran for a transition (host tasks) follows the table, per entry.
  size_t newest = 0;
  for (size_t i = 0; i < events.size(); ++i)
    if (!text(events[i], "output", "").empty()) newest = i;
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    std::string output = text(e, "output", "");
    if (e.value("id", int64_t{0}) <= afterId || output.empty()) continue;
    std::string title = text(e, "at") + " " + text(e, "from") + " -> " + text(e, "to");
    // The kept output is the whole of it unless it outgrew the cap; then it is printed whole.
    if (i == newest && streamed > 0 && streamed <= output.size()) {
      output.erase(0, streamed);
      title += ", the rest of the output";
      if (output.empty()) continue;
    }
    ctx.out() << "\n--- " << title << " ---\n" << output << (output.back() == '\n' ? "" : "\n");
  }
}

int64_t lastId(const json& events) {
  return events.empty() ? 0 : events.back().value("id", int64_t{0});
}

// Prints the running task's output as it comes, then the transitions its end made.
int followTask(Context& ctx, const LifecycleOpts& o, int64_t seenId) {
  int64_t offset = 0;
  int64_t announced = -1;  // the task announced last; -1 none, 0 a drain
  size_t streamed = 0;     // bytes of its output printed
  for (;;) {
    auto chunk = ctx.get(hostPath(o, "task-output") + "?offset=" + std::to_string(offset));
    if (!chunk.ok()) return ctx.fail(chunk.status());
    const std::string data = text(*chunk, "data", "");
    const int64_t task = chunk->value("task_id", int64_t{0});
    if (task != announced && chunk->value("running", false)) {
      // 0: a handover that is still draining; its task comes once the host is drained.
      ctx.out() << (task == 0 ? "\n--- draining: the task starts once nothing runs here ---\n"
                              : "\n--- running now (task " + std::to_string(task) + ") ---\n");
      if (task != 0) offset = 0;
      streamed = 0;
      announced = task;
    }
    ctx.out() << data << std::flush;
    if (task != 0) streamed += data.size();
    offset = chunk->value("offset", int64_t{0}) + static_cast<int64_t>(data.size());
    if (!chunk->value("running", false)) break;
    std::this_thread::sleep_for(kFollowPoll);
  }
  auto events = ctx.get(hostPath(o, "events"));
  if (!events.ok()) return ctx.fail(events.status());
  if (announced >= 0) ctx.out() << "\n";
  printTransitions(ctx, *events, seenId, streamed);
  return 0;
}

int hostLog(Context& ctx, const LifecycleOpts& o) {
  auto events = ctx.get(hostPath(o, "events"));
  if (!events.ok()) return ctx.fail(events.status());
  if (ctx.jsonOutput()) return ctx.printJson(*events);
  if (events->empty() && !o.follow) {
    ctx.out() << "Host " << o.name << " has had no admin-state transitions\n";
    return 0;
  }
  printTransitions(ctx, *events, 0);
  if (o.follow) return followTask(ctx, o, lastId(*events));
  return 0;
}

}  // namespace

void addHostLifecycleCommands(CLI::App* host, Context& ctx) {
  auto o = std::make_shared<LifecycleOpts>();

  auto* drainCmd = host->add_subcommand(
      "drain", "Take a host out of service: no new jobs; running ones may finish (platform-admin)");
  drainCmd->add_option("HOST", o->name, "Host name")->required();
  drainCmd->add_option("--deadline", o->deadline,
                       "Preempt what still runs after this long, e.g. 30m, 2h "
                       "(preemptible jobs are requeued; default: wait for it to finish)");
  drainCmd->add_option("--reason", o->reason, "Why, for `allot host log` and the jobs it stops");
  drainCmd->add_flag("--force", o->force,
                     "With --deadline: drain even though work still running then is stopped "
                     "(otherwise it is listed and you are asked; a script is refused)");
  onRun(drainCmd, ctx, o, drain);

  auto* resumeCmd = host->add_subcommand(
      "resume", "Return a drained, draining or failed host to service (platform-admin)");
  resumeCmd->add_option("HOST", o->name, "Host name")->required();
  onRun(resumeCmd, ctx, o, resume);

  auto* failCmd = host->add_subcommand(
      "fail", "Mark a host failed: no new jobs until resumed (platform-admin)");
  failCmd->add_option("HOST", o->name, "Host name")->required();
  failCmd->add_option("--reason", o->reason, "Why");
  onRun(failCmd, ctx, o,
        [](Context& c, const LifecycleOpts& x) { return setState(c, x, "failed"); });

  auto* retireCmd =
      host->add_subcommand("retire", "Retire a host for good: no new jobs, ever (platform-admin)");
  retireCmd->add_option("HOST", o->name, "Host name")->required();
  retireCmd->add_option("--reason", o->reason, "Why");
  onRun(retireCmd, ctx, o,
        [](Context& c, const LifecycleOpts& x) { return setState(c, x, "retired"); });

  auto* reprovisionCmd = host->add_subcommand(
      "reprovision",
      "Run a host profile (ansible playbook or script) on a drained host; back to available on "
      "success, failed otherwise (platform-admin)");
  reprovisionCmd->add_option("HOST", o->name, "Host name")->required();
  reprovisionCmd->add_option("--profile", o->profile,
                             "Profile from allotd's [hooks.profiles] (default: default)");
  reprovisionCmd->add_option("--timeout", o->timeout,
                             "Kill the hook after this long, e.g. 10m (default 30m)");
  onRun(reprovisionCmd, ctx, o, reprovision);

  auto* logCmd =
      host->add_subcommand("log", "A host's admin-state transitions: who, when, from, to, why");
  logCmd->add_option("HOST", o->name, "Host name")->required();
  logCmd->add_flag("-f,--follow", o->follow,
                   "Also print the output of the task the host runs now as it comes, until it "
                   "ends");
  onRun(logCmd, ctx, o, hostLog);
}

}  // namespace allot::cli
