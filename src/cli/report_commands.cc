// `allot report usage`: allocated GPU-hours from the allocation ledger and how much of them the
// GPUs really worked (GET /usage), as a table, CSV or JSON.

#include <cmath>
#include <cstdio>

#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/table.h"
#include "common/time_format.h"

namespace allot::cli {
namespace {

struct UsageOpts {
  std::string by;
  std::string from;
  std::string to;
  std::string team;
};

constexpr const char* kColumns[] = {
    "name",       "gpu_hours_allocated", "gpu_hours_measured", "gpu_hours_used",
    "efficiency", "idle_gpu_hours",      "peak_gpus",          "cost"};

// A number with at most `decimals` places and no trailing zeros; "" for null or missing.
std::string number(const json& row, const char* key, int decimals) {
  if (!row.contains(key) || !row[key].is_number()) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, row[key].get<double>());
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

std::string csvField(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Jobs flagged idle now, after the usage table; nothing when there are none.
void printIdleAllocations(Context& ctx, const json& report) {
  auto idle = report.find("idle_allocations");
  if (idle == report.end() || !idle->is_array() || idle->empty()) return;
  Table t({"JOB", "TEAM", "PROJECT", "USER", "HOST", "GPUS", "IDLE SINCE", "UNDER", "RECLAIM AT"});
  for (const auto& a : *idle) {
    t.addRow({formatJobId(a.value("job", int64_t{0})), text(a, "team"), text(a, "project"),
              text(a, "user"), text(a, "host"), text(a, "gpus"), text(a, "idle_since"),
              number(a, "threshold", 1) + "%", text(a, "reclaim_at")});
  }
  ctx.out() << "\nidle allocations now:\n" << t.render();
}

int reportUsage(Context& ctx, const UsageOpts& o) {
  auto window = windowQuery(o.from, o.to, ctx.now());
  if (!window.ok()) return ctx.usageError(window.status());
  std::string query = "?by=" + urlEncode(o.by) + *window;
  if (auto team = ctx.teamOr(o.team); !team.empty()) query += "&team=" + urlEncode(team);
  auto report = ctx.get("/usage" + query);
  if (!report.ok()) return ctx.fail(report.status());
  if (ctx.jsonOutput()) return ctx.printJson(*report);
  const json rows = report->contains("rows") ? (*report)["rows"] : json::array();
  if (ctx.flags.output == "csv") {
    std::string out;
    for (const char* c : kColumns) out += (out.empty() ? "" : ",") + std::string(c);
    out += "\n";
    for (const auto& r : rows) {
      out += csvField(text(r, "name", ""));
      for (size_t i = 1; i < std::size(kColumns); ++i) out += "," + number(r, kColumns[i], 6);
      out += "\n";
    }
    ctx.out() << out;
    return 0;
  }
  auto orDash = [](std::string s) { return s.empty() ? std::string("-") : s; };
  auto percent = [&](const json& r) {
    if (!r.contains("efficiency") || !r["efficiency"].is_number()) return std::string("-");
    json scaled = {{"v", r["efficiency"].get<double>() * 100}};
    return number(scaled, "v", 1) + "%";
  };
  Table table({"NAME", "GPU-HOURS", "USED", "EFFICIENCY", "IDLE", "PEAK GPUS", "COST"});
  for (const auto& r : rows) {
    table.addRow({text(r, "name"), orDash(number(r, "gpu_hours_allocated", 2)),
                  orDash(number(r, "gpu_hours_used", 2)), percent(r),
                  orDash(number(r, "idle_gpu_hours", 2)), orDash(number(r, "peak_gpus", 3)),
                  orDash(number(r, "cost", 2))});
  }
  ctx.out() << "usage by " << text(*report, "by") << " from " << text(*report, "from") << " to "
            << text(*report, "to") << " (idle: under " << number(*report, "idle_below_percent", 1)
            << "% utilisation)\n";
  if (!table.empty()) ctx.out() << table.render();
  printIdleAllocations(ctx, *report);
  return 0;
}

}  // namespace

void addReportCommands(CLI::App& app, Context& ctx) {
  auto* report = addGroup(app, "report", "Reports: GPU-hours allocated and used");
  auto o = std::make_shared<UsageOpts>();
  auto* usage = report->add_subcommand(
      "usage",
      "GPU-hours allocated and used by team, project, user, host or GPU model (-o table|csv|json)");
  usage->add_option("--by", o->by, "What a row is: team, project, user, host or gpu-model")
      ->required()
      ->check(CLI::IsMember({"team", "project", "user", "host", "gpu-model"}));
  usage->add_option("--from", o->from,
                    "Start of the window (ISO 8601, or relative: -30d, -2h; default 30 days "
                    "before --to)");
  usage->add_option("--to", o->to,
                    "End of the window, exclusive (ISO 8601 or relative; "
                    "default now)");
  usage->add_option("--team", o->team, "Only this team (platform-admin; members see their own)");
  usage->footer(
      "USED weighs allocated time by GPU utilisation; EFFICIENCY is USED / GPU-HOURS; IDLE is "
      "allocated time whose samples read under the idle threshold. They show - when no agent "
      "sampled the GPUs. Cost needs [prices] in allotd's config.");
  usage->callback([&ctx, o] {
    ctx.allowCsv();
    ctx.setAction([&ctx, o] { return reportUsage(ctx, *o); });
  });
}

}  // namespace allot::cli
