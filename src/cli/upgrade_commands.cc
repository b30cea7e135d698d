// allot host upgrade|upgrades: rolling upgrades of a pool (docs/hosts.md, "Rolling upgrades").
// Added under `allot host` by addHostCommands.

#include <chrono>
#include <thread>

#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/table.h"
#include "common/time_format.h"

namespace allot::cli {
namespace {

// Progress is polled this often with --wait: a step takes minutes (drain, hook, health check).
constexpr auto kPollInterval = std::chrono::seconds(2);

struct UpgradeOpts {
  std::string pool;
  std::string hook;
  int maxUnavailable = 1;
  std::string drainDeadline;
  bool wait = false;
  std::string id;
};

// "upgrade 3 of pool shared (profile driver-550): stopped at gpu-02: host gpu-02: ...".
std::string summary(const json& u) {
  std::string out = "upgrade " + text(u, "id") + " of pool " + text(u, "pool") + " (profile " +
                    text(u, "profile") + "): " + text(u, "state");
  if (text(u, "state") == "stopped") {
    std::string at = text(u, "stopped_at", "");
    if (!at.empty()) out += " at " + at;
    std::string why = text(u, "reason", "");
    if (!why.empty()) out += ": " + why;
  }
  return out;
}

int countIn(const json& u, const std::string& state) {
  int n = 0;
  for (const auto& h : u.value("hosts", json::array())) n += text(h, "state") == state ? 1 : 0;
  return n;
}

void printUpgrade(Context& ctx, const json& u) {
  ctx.out() << summary(u) << "\n";
  Table table({"HOST", "STATE", "STARTED", "ENDED", "REASON"});
  for (const auto& h : u.value("hosts", json::array())) {
    table.addRow({text(h, "host"), text(h, "state"), text(h, "started_at"), text(h, "ended_at"),
                  text(h, "reason")});
  }
  ctx.out() << table.render();
}

// Exit status of a finished upgrade: 0 only when it went through the whole pool.
int outcome(Context& ctx, const json& u) {
  if (text(u, "state") == "succeeded") return 0;
  ctx.err() << "allot: " << summary(u) << "\n";
  return 1;
}

int follow(Context& ctx, json u) {
  const std::string path = "/upgrades/" + text(u, "id");
  std::string last;
  for (;;) {
    // One line whenever a host changes step, so a log of the run reads as what happened.
    std::string line = text(u, "state") + ": " + std::to_string(countIn(u, "done")) + " done, " +
                       std::to_string(countIn(u, "running")) + " running, " +
                       std::to_string(countIn(u, "pending")) + " pending, " +
                       std::to_string(countIn(u, "skipped")) + " skipped";
    if (line != last && !ctx.jsonOutput())
      ctx.out() << "upgrade " << text(u, "id") << " " << line << "\n";
    last = line;
    if (text(u, "state") != "running") break;
    std::this_thread::sleep_for(kPollInterval);
    auto next = ctx.get(path);
    if (!next.ok()) return ctx.fail(next.status());
    u = std::move(next).value();
  }
  if (ctx.jsonOutput()) {
    ctx.printJson(u);
  } else {
    printUpgrade(ctx, u);
  }
  return outcome(ctx, u);
}

int startUpgrade(Context& ctx, const UpgradeOpts& o) {
  json body = {{"pool", o.pool}, {"profile", o.hook}, {"max_unavailable", o.maxUnavailable}};
  if (!o.drainDeadline.empty()) {
    // Checked here too, so a typo is a usage error before anything is sent.
    auto d = parseDurationMs(o.drainDeadline);
    if (!d.ok() || *d <= 0)
      return ctx.usageError(Status::InvalidArgument("--drain-deadline: '" + o.drainDeadline +
                                                    "' is not a positive duration (e.g. 30m, 2h)"));
    body["drain_deadline"] = o.drainDeadline;
  }
  if (o.maxUnavailable < 1)
    return ctx.usageError(Status::InvalidArgument("--max-unavailable: must be at least 1"));
  auto u = ctx.post("/upgrades", body);
  if (o.wait && u.ok()) return follow(ctx, *u);
  return ctx.printReplyLine(u, [](const json& started) {
    return "Started " + summary(started) + "\n(`allot host upgrades " + text(started, "id") +
           "` shows its progress)";
  });
}

int showUpgrades(Context& ctx, const UpgradeOpts& o) {
  if (!o.id.empty()) {
    return ctx.printReply(ctx.get("/upgrades/" + urlEncode(o.id)),
                          [&](const json& u) { printUpgrade(ctx, u); });
  }
  return ctx.printReply(ctx.get("/upgrades"), [&](const json& list) {
    Table table({"ID", "POOL", "PROFILE", "STATE", "HOSTS", "DONE", "BY", "CREATED", "STOPPED AT"});
    for (const auto& u : list) {
      table.addRow({text(u, "id"), text(u, "pool"), text(u, "profile"), text(u, "state"),
                    std::to_string(u.value("hosts", json::array()).size()),
                    std::to_string(countIn(u, "done")), text(u, "by"), text(u, "created_at"),
                    text(u, "stopped_at")});
    }
    ctx.out() << table.render();
  });
}

}  // namespace

void addHostUpgradeCommands(CLI::App* host, Context& ctx) {
  auto o = std::make_shared<UpgradeOpts>();
  auto* upgrade = host->add_subcommand(
      "upgrade",
      "Upgrade a pool batch by batch: drain, run the hook, health check, resume; stops at the "
      "first failure (platform-admin)");
  upgrade->add_option("--pool", o->pool, "'shared' (hosts with no owner) or a team name")
      ->required();
  upgrade->add_option("--hook", o->hook, "Profile from allotd's [hooks.profiles]")->required();
  upgrade->add_option("--max-unavailable", o->maxUnavailable,
                      "Hosts out of service at once (default 1)");
  upgrade->add_option("--drain-deadline", o->drainDeadline,
                      "Preempt others' work this long after a host's drain, e.g. 30m "
                      "(default: let it finish)");
  upgrade->add_flag("--wait", o->wait,
                    "Follow progress; exit non-zero, saying where, if the upgrade stops");
  onRun(upgrade, ctx, o, startUpgrade);

  auto* list = host->add_subcommand("upgrades", "Rolling upgrades, or one upgrade's hosts");
  list->add_option("ID", o->id, "Upgrade id");
  onRun(list, ctx, o, showUpgrades);
}

}  // namespace allot::cli
