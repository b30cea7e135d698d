// allot host assign|unassign: hand a host (or single GPUs) to a team and back (docs/hosts.md).
// Added under `allot host` by addHostCommands.

#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "common/time_format.h"

namespace allot::cli {
namespace {

struct HandoverOpts {
  std::string name;
  std::string team;
  std::string gpus;  // "0,1"
  std::string deadline;
  std::string reason;
};

int handover(Context& ctx, const HandoverOpts& o, const char* action) {
  json body = json::object();
  if (!o.team.empty()) body["team"] = o.team;
  if (!o.gpus.empty()) {
    json list = json::array();
    for (const auto& item : splitList(o.gpus)) {
      int index = -1;
      try {
        size_t used = 0;
        index = std::stoi(item, &used);
        if (used != item.size()) index = -1;
      } catch (...) {
      }
      if (index < 0)
        return ctx.usageError(
            Status::InvalidArgument("--gpus: '" + item + "' is not a GPU index (e.g. 0,1)"));
      list.push_back(index);
    }
    body["gpus"] = list;
  }
  if (!o.deadline.empty()) {
    auto d = parseDurationMs(o.deadline);
    if (!d.ok()) return ctx.usageError(d.status().withContext("--deadline"));
    body["deadline"] = o.deadline;
  }
  if (!o.reason.empty()) body["reason"] = o.reason;
  auto reply = ctx.post("/hosts/" + urlEncode(o.name) + "/" + action, body);
  return ctx.printReply(reply, [&](const json& host) {
    if (!o.gpus.empty()) {
      ctx.out() << "Host " << o.name << ": GPUs " << o.gpus
                << (o.team.empty() ? " returned to the host's pool"
                                   : " dedicated to team " + o.team)
                << "\n";
      return;
    }
    std::string to = text(host, "handover_to", "");
    ctx.out() << "Host " << o.name << ": " << text(host, "admin_state") << ", handover to "
              << (to.empty() ? text(host, "pool", "shared") : to)
              << "\n(drain, wipe, profile, health check; `allot host log " << o.name
              << " --follow` shows it as it runs)\n";
  });
}

}  // namespace

void addHostHandoverCommands(CLI::App* host, Context& ctx) {
  auto o = std::make_shared<HandoverOpts>();
  auto addCommon = [&](CLI::App* cmd) {
    cmd->add_option("HOST", o->name, "Host name")->required();
    cmd->add_option("--gpus", o->gpus,
                    "Only these GPUs, e.g. 0,1: at once, without drain or wipe (the host's other "
                    "tenants stay)");
    cmd->add_option("--deadline", o->deadline,
                    "How long others' work may run before it is preempted, e.g. 30m (default: "
                    "at once)");
    cmd->add_option("--reason", o->reason, "Why, for `allot host log`");
  };
  auto* assign = host->add_subcommand(
      "assign",
      "Hand a host to a team: drain, wipe, the team's profile, health check; then only that team "
      "sees it (platform-admin)");
  addCommon(assign);
  assign->add_option("--team", o->team, "The team that gets it")->required();
  onRun(assign, ctx, o, [](Context& c, const HandoverOpts& x) { return handover(c, x, "assign"); });

  auto* unassign = host->add_subcommand(
      "unassign",
      "Return a host to the shared pool through drain, wipe, profile and health check "
      "(platform-admin)");
  addCommon(unassign);
  onRun(unassign, ctx, o,
        [](Context& c, const HandoverOpts& x) { return handover(c, x, "unassign"); });
}

}  // namespace allot::cli
