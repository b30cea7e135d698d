// allot lease: ask for hosts for a time, list leases (or a calendar of them), approve, reject,
// extend, end (POST/GET /leases...; docs/leases.md).

#include <algorithm>
#include <charconv>
#include <map>

#include "cli/commands.h"
#include "cli/confirm_disruption.h"
#include "cli/format.h"
#include "cli/table.h"
#include "common/time_format.h"

namespace allot::cli {
namespace {

constexpr TimeMs kDayMs = 24 * 3'600'000;

struct LeaseOpts {
  std::string id;
  std::string team;
  std::vector<std::string> hosts;
  int count = 0;
  std::string gpuModel;
  int minGpus = 0;
  std::string start;
  std::string end;
  std::string reason;
  bool calendar = false;
  int days = 14;
  bool force = false;  // approve: go on even when its start preempts running work
};

// Times are read here, so a typo is a usage error, and sent as absolute ISO 8601.
Result<std::string> timeArg(const std::string& value, const char* flag, TimeMs now) {
  auto t = parseTime(value, now);
  if (!t.ok()) return t.status().withContext(flag);
  return formatIso8601(*t);
}

Result<int64_t> leaseId(const std::string& text) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v <= 0)
    return Status::InvalidArgument("'" + text + "' is not a lease id");
  return v;
}

std::string hostsText(const json& l) {
  std::string out;
  for (const auto& h : l.value("hosts", json::array()))
    out += (out.empty() ? "" : ",") + h.get<std::string>();
  if (!out.empty()) return out;
  std::string want = text(l, "count") + " host(s)";
  if (l.contains("min_gpus") && l["min_gpus"].is_number())
    want += " >=" + text(l, "min_gpus") + " GPUs";
  if (l.contains("gpu_model") && l["gpu_model"].is_string()) want += " " + text(l, "gpu_model");
  return want;
}

// POST `path` and show the lease it answers with as "<verb> lease 7 (approved): team ...".
int postLease(Context& ctx, const std::string& path, const json& body, const std::string& verb) {
  return ctx.printReplyLine(ctx.post(path, body), [&](const json& l) {
    return verb + " lease " + text(l, "id") + " (" + text(l, "state") + "): team " +
           text(l, "team") + ", " + hostsText(l) + ", " + text(l, "start") + " to " +
           text(l, "end");
  });
}

int create(Context& ctx, const LeaseOpts& o) {
  if (o.hosts.empty() == (o.count == 0))
    return ctx.usageError(
        Status::InvalidArgument("give --host (one or more) or --count, not both"));
  if (!o.hosts.empty() && (!o.gpuModel.empty() || o.minGpus > 0))
    return ctx.usageError(Status::InvalidArgument("--gpu-model and --min-gpus go with --count"));
  auto start = timeArg(o.start, "--start", ctx.now());
  if (!start.ok()) return ctx.usageError(start.status());
  auto end = timeArg(o.end, "--end", ctx.now());
  if (!end.ok()) return ctx.usageError(end.status());
  json body = {{"team", o.team}, {"start", *start}, {"end", *end}};
  if (!o.hosts.empty()) body["hosts"] = o.hosts;
  if (o.count > 0) body["count"] = o.count;
  if (!o.gpuModel.empty()) body["gpu_model"] = o.gpuModel;
  if (o.minGpus > 0) body["min_gpus"] = o.minGpus;
  if (!o.reason.empty()) body["reason"] = o.reason;
  return postLease(ctx, "/leases", body, "Created");
}

// One row per host, one column per day from today (UTC): the lease holding the host that day
// ("7"; "7?" while only requested), "." when free.
std::string calendar(const json& leases, TimeMs now, int days) {
  const TimeMs first = now - now % kDayMs;
  std::map<std::string, std::vector<std::string>> rows;
  for (const auto& l : leases) {
    const std::string state = text(l, "state");
    if (state != "requested" && state != "approved" && state != "active") continue;
    auto start = parseTime(text(l, "start", ""), now);
    auto end = parseTime(text(l, "end", ""), now);
    if (!start.ok() || !end.ok()) continue;
    std::vector<std::string> hosts;
    for (const auto& h : l.value("hosts", json::array())) hosts.push_back(h.get<std::string>());
    if (hosts.empty()) hosts.push_back("(" + text(l, "count") + " to pick)");
    const std::string mark = text(l, "id") + (state == "requested" ? "?" : "");
    for (const auto& h : hosts) {
      auto& row = rows[h];
      row.resize(days, ".");
      for (int d = 0; d < days; ++d) {
        const TimeMs from = first + d * kDayMs, to = from + kDayMs;
        if (*start < to && from < *end) row[d] = row[d] == "." ? mark : row[d] + "," + mark;
      }
    }
  }
  if (rows.empty()) return "No leases in the next " + std::to_string(days) + " days.\n";
  std::vector<std::string> headers = {"HOST"};
  for (int d = 0; d < days; ++d) headers.push_back(formatIso8601(first + d * kDayMs).substr(5, 5));
  Table table(headers);
  for (auto& [host, cells] : rows) {
    cells.insert(cells.begin(), host);
    table.addRow(cells);
  }
  return table.render() +
         "Each column is a day (UTC); a cell is the lease holding the host "
         "then, with ? while only requested.\n";
}

int list(Context& ctx, const LeaseOpts& o) {
  return ctx.printReply(ctx.get("/leases"), [&](const json& leases) {
    if (o.calendar) {
      ctx.out() << calendar(leases, ctx.now(), o.days);
      return;
    }
    Table table({"ID", "TEAM", "STATE", "HOSTS", "START", "END", "REASON"});
    for (const auto& l : leases) {
      table.addRow({text(l, "id"), text(l, "team"), text(l, "state"), hostsText(l),
                    text(l, "start"), text(l, "end"), text(l, "reason", "")});
    }
    ctx.out() << (table.empty() ? "No leases.\n" : table.render());
  });
}

int show(Context& ctx, const LeaseOpts& o) {
  auto id = leaseId(o.id);
  if (!id.ok()) return ctx.usageError(id.status());
  auto lease = ctx.get("/leases/" + std::to_string(*id));
  if (!lease.ok()) return ctx.fail(lease.status());
  if (ctx.jsonOutput()) return ctx.printJson(*lease);
  const json& l = *lease;
  Details d;
  d.add("id", text(l, "id"));
  d.add("team", text(l, "team"));
  d.add("state", text(l, "state"));
  d.add("hosts", hostsText(l));
  d.add("start", timeText(l, "start", ctx.now()));
  d.add("end", timeText(l, "end", ctx.now()));
  if (!text(l, "reason", "").empty()) d.add("reason", text(l, "reason"));
  d.add("requested by", text(l, "requested_by") + ", " + timeText(l, "created_at", ctx.now()));
  if (!text(l, "decided_by", "").empty())
    d.add("decided by",
          text(l, "decided_by") + ", " + timeText(l, "decided_at", ctx.now()) +
              (text(l, "decision", "").empty() ? "" : " (" + text(l, "decision") + ")"));
  if (!text(l, "started_at", "").empty()) d.add("started", timeText(l, "started_at", ctx.now()));
  if (!text(l, "ended_at", "").empty()) d.add("ended", timeText(l, "ended_at", ctx.now()));
  std::string skipped;
  for (const auto& s : l.value("skipped_hosts", json::array()))
    if (s.is_string()) skipped += (skipped.empty() ? "" : "; ") + s.get<std::string>();
  if (!skipped.empty()) d.add("not handed over", skipped);
  static const std::set<std::string> kShown = {
      "id",         "team",       "state",    "hosts",      "count",        "gpu_model",
      "min_gpus",   "start",      "end",      "reason",     "requested_by", "created_at",
      "decided_by", "decided_at", "decision", "started_at", "ended_at",     "skipped_hosts"};
  d.addOthers(l, kShown);
  ctx.out() << d.render();
  return 0;
}

// approve, reject, end: POST /leases/{id}/{verb} with an optional reason.
int decide(Context& ctx, const LeaseOpts& o, const std::string& verb, const std::string& done) {
  auto id = leaseId(o.id);
  if (!id.ok()) return ctx.usageError(id.status());
  json body = json::object();
  if (!o.reason.empty()) body["reason"] = o.reason;
  const std::string path = "/leases/" + std::to_string(*id);
  if (verb == "approve") {
    if (auto stop = confirmDisruption(ctx, path + "/impact",
                                      "approving lease " + std::to_string(*id), o.force))
      return *stop;
  }
  return postLease(ctx, path + "/" + verb, body, done);
}

int extend(Context& ctx, const LeaseOpts& o) {
  auto id = leaseId(o.id);
  if (!id.ok()) return ctx.usageError(id.status());
  auto end = timeArg(o.end, "--end", ctx.now());
  if (!end.ok()) return ctx.usageError(end.status());
  return postLease(ctx, "/leases/" + std::to_string(*id) + "/extend", json{{"end", *end}},
                   "Extended");
}

}  // namespace

void addLeaseCommands(CLI::App& app, Context& ctx) {
  auto* lease = addGroup(app, "lease", "Hosts for a team for a time (docs/leases.md)");

  auto o = std::make_shared<LeaseOpts>();
  auto* create_ = lease->add_subcommand(
      "create", "Ask for hosts for a team from --start to --end (team-admin, platform-admin)");
  create_->add_option("--team", o->team, "The team")->required();
  create_->add_option("--host", o->hosts, "A host to lease (repeat for more)");
  create_->add_option("--count", o->count, "Or: this many hosts, picked at approval")
      ->check(CLI::Range(1, 1000));
  create_->add_option("--gpu-model", o->gpuModel, "With --count: hosts of this GPU model");
  create_->add_option("--min-gpus", o->minGpus, "With --count: hosts with at least this many GPUs")
      ->check(CLI::Range(1, 1024));
  create_->add_option("--start", o->start, "ISO 8601, or relative (+2h)")->required();
  create_->add_option("--end", o->end, "ISO 8601, or relative (+2d)")->required();
  create_->add_option("--reason", o->reason, "What it is for");
  create_->footer(
      "Example: allot lease create --team nlp --count 2 --gpu-model H100 --start +1d "
      "--end +3d --reason 'eval sprint'");
  onRun(create_, ctx, o, create);

  auto* list_ = lease->add_subcommand("list", "Leases you may see (your team's; admins: all)");
  list_->add_flag("--calendar", o->calendar, "A timeline per host by day instead of a table");
  list_->add_option("--days", o->days, "With --calendar: how many days (default 14)")
      ->check(CLI::Range(1, 92));
  onRun(list_, ctx, o, list);

  auto* show_ = lease->add_subcommand("show", "Show a lease: its hosts, times and decisions");
  show_->add_option("ID", o->id, "Lease id")->required();
  onRun(show_, ctx, o, show);

  struct Verb {
    const char* name;
    const char* help;
    const char* done;
  };
  for (const Verb& v : {Verb{"approve", "Approve a requested lease (platform-admin)", "Approved"},
                        Verb{"reject", "Reject a requested lease (platform-admin)", "Rejected"},
                        Verb{"end", "End a lease now, or cancel one not started", "Ended"}}) {
    auto* cmd = lease->add_subcommand(v.name, v.help);
    cmd->add_option("ID", o->id, "Lease id")->required();
    cmd->add_option("--reason", o->reason, "Why");
    const std::string verb = v.name, done = v.done;
    if (verb == "approve")
      cmd->add_flag("--force", o->force,
                    "Approve even though its start preempts running work (otherwise the jobs "
                    "it stops are listed and you are asked; a script is refused)");
    onRun(cmd, ctx, o,
          [verb, done](Context& c, const LeaseOpts& x) { return decide(c, x, verb, done); });
  }
  auto* ext = lease->add_subcommand("extend", "Move a lease's end later (refused on a conflict)");
  ext->add_option("ID", o->id, "Lease id")->required();
  ext->add_option("--end", o->end, "The new end: ISO 8601, or relative (+1d)")->required();
  onRun(ext, ctx, o, extend);
}

}  // namespace allot::cli
