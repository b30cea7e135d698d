// allot team idle-policy, allot events: when an allocation counts as idle and what happens then,
// and the events that report it (GET/PUT/DELETE .../idle-policy, GET /events).

#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/table.h"
#include "common/time_format.h"

namespace allot::cli {
namespace {

struct PolicyOpts {
  std::string team;
  std::string project;
  std::string threshold;
  std::string after;
  std::string action;
  std::string grace;
  std::string webhook;
  bool webhookGiven = false;
};

std::string policyPath(const PolicyOpts& o) {
  std::string path = "/teams/" + urlEncode(o.team);
  if (!o.project.empty()) path += "/projects/" + urlEncode(o.project);
  return path + "/idle-policy";
}

// "team ml", "project ml/resnet".
std::string ownerText(const PolicyOpts& o) {
  return o.project.empty() ? "team " + o.team : "project " + o.team + "/" + o.project;
}

std::string webhookText(const json& p) {
  if (std::string url = text(p, "webhook", ""); !url.empty()) return url;
  return isTrue(p, "webhook_set") ? "set (shown to team-admins)" : "none";
}

// 10 rather than 10.0; 12.5 stays.
std::string percentText(const json& p) {
  auto it = p.find("threshold_percent");
  if (it == p.end() || !it->is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g%%", it->get<double>());
  return buf;
}

std::string policyLine(const json& p) {
  std::string line = "idle when all GPUs stay under " + percentText(p) + " for " +
                     text(p, "after") + "; " + text(p, "action");
  if (text(p, "action") == "reclaim") line += " after a grace of " + text(p, "grace");
  return line;
}

int policySet(Context& ctx, const PolicyOpts& o) {
  json body = json::object();
  if (!o.threshold.empty()) {
    char* end = nullptr;
    double v = std::strtod(o.threshold.c_str(), &end);
    if (end == o.threshold.c_str() || *end != '\0')
      return ctx.usageError(
          Status::InvalidArgument("--threshold '" + o.threshold + "': expected a percentage"));
    body["threshold_percent"] = v;
  }
  // Durations are checked by the server, which names the field in its error.
  if (!o.after.empty()) body["after"] = o.after;
  if (!o.action.empty()) body["action"] = o.action;
  if (!o.grace.empty()) body["grace"] = o.grace;
  if (o.webhookGiven) body["webhook"] = o.webhook;
  if (body.empty())
    return ctx.usageError(Status::InvalidArgument(
        "nothing to set: give --threshold, --after, --action, --grace or --webhook"));
  return ctx.printReplyLine(ctx.put(policyPath(o), body), [&](const json& p) {
    return "Set the idle policy of " + ownerText(o) + ": " + policyLine(p);
  });
}

int policyShow(Context& ctx, const PolicyOpts& o) {
  return ctx.printReply(ctx.get(policyPath(o)), [&](const json& p) {
    Details d;
    d.add("owner", ownerText(o));
    d.add("from", text(p, "source"));
    d.add("threshold", percentText(p));
    d.add("after", text(p, "after"));
    d.add("action", text(p, "action"));
    d.add("grace", text(p, "grace"));
    d.add("webhook", webhookText(p));
    ctx.out() << d.render();
  });
}

int policyUnset(Context& ctx, const PolicyOpts& o) {
  return ctx.printReplyLine(ctx.del(policyPath(o)), [&](const json& p) {
    return "Project " + o.team + "/" + o.project + " now follows its " + text(p, "source") +
           "'s idle policy: " + policyLine(p);
  });
}

struct EventOpts {
  std::string team;
  std::string job;
  std::string kind;
  std::string since;
  int limit = 100;
};

int listEvents(Context& ctx, const EventOpts& o) {
  std::string query = "?limit=" + std::to_string(o.limit);
  if (!o.team.empty()) query += "&team=" + urlEncode(o.team);
  if (!o.job.empty()) {
    auto id = parseJobId(o.job);
    if (!id.ok()) return ctx.usageError(id.status());
    query += "&job=" + std::to_string(*id);
  }
  if (!o.kind.empty()) query += "&kind=" + urlEncode(o.kind);
  if (!o.since.empty()) {
    auto t = parseTime(o.since, ctx.now());
    if (!t.ok()) return ctx.usageError(t.status().withContext("--since"));
    query += "&since=" + urlEncode(formatIso8601(*t));
  }
  return ctx.printReply(ctx.get("/events" + query), [&](const json& events) {
    Table table({"AT", "KIND", "JOB", "TEAM", "USER", "MESSAGE"});
    for (const auto& e : events) {
      table.addRow({text(e, "at"), text(e, "kind"), formatJobId(e.value("job", int64_t{0})),
                    text(e, "team"), text(e, "user"), text(e, "message")});
    }
    ctx.out() << (table.empty() ? "No events.\n" : table.render());
  });
}

}  // namespace

void addIdleCommands(CLI::App& app, Context& ctx) {
  auto* idle = addGroup(*app.get_subcommand("team"), "idle-policy",
                        "When a team's or project's allocations count as idle, and what then");
  {
    auto o = std::make_shared<PolicyOpts>();
    auto* set = idle->add_subcommand(
        "set", "Set the idle policy of a team or project (team-admin, platform-admin)");
    set->add_option("TEAM", o->team, "Team name")->required();
    set->add_option("--project", o->project, "A project of the team (default: the team's own)");
    set->add_option("--threshold", o->threshold,
                    "Utilisation percentage under which a GPU is idle (0-100; default 5)");
    set->add_option("--after", o->after, "How long all GPUs must stay idle (default 30m)");
    set->add_option("--action", o->action, "notify, or reclaim after the grace (default notify)")
        ->check(CLI::IsMember({"notify", "reclaim"}));
    set->add_option("--grace", o->grace, "Between notifying and reclaiming (default 15m)");
    set->add_option("--webhook", o->webhook,
                    "http:// URL that receives each event as JSON; \"\" removes it")
        ->each([o](const std::string&) { o->webhookGiven = true; });
    set->footer(
        "Fields not given keep the values now in effect. Example: allot team idle-policy set ml "
        "--threshold 10 --after 1h --action reclaim --grace 15m");
    onRun(set, ctx, o, policySet);

    auto* show = idle->add_subcommand(
        "show", "Show the idle policy in effect for a team or project, and where it comes from");
    show->add_option("TEAM", o->team, "Team name")->required();
    show->add_option("--project", o->project, "A project of the team");
    onRun(show, ctx, o, policyShow);

    auto* unset = idle->add_subcommand(
        "unset", "Drop a project's own idle policy: it follows its team's again");
    unset->add_option("TEAM", o->team, "Team name")->required();
    unset->add_option("--project", o->project, "The project")->required();
    onRun(unset, ctx, o, policyUnset);
  }

  auto o = std::make_shared<EventOpts>();
  auto* events = app.add_subcommand(
      "events", "Events about allocations: idle, busy again, reclaimed (oldest first)");
  events->add_option("--team", o->team, "Only this team (platform-admin; members see their own)");
  events->add_option("--job", o->job, "Only this job");
  events->add_option("--kind", o->kind, "Only this kind")
      ->check(CLI::IsMember({"allocation_idle", "allocation_busy_again", "allocation_reclaimed",
                             "lease_changed", "lease_preemption_notice"}));
  events->add_option("--since", o->since, "Only from then on (ISO 8601, or relative: -2h)");
  events->add_option("--limit", o->limit, "At most this many, the newest (default 100)")
      ->check(CLI::Range(1, 10000));
  onRun(events, ctx, o, listEvents);
}

}  // namespace allot::cli
