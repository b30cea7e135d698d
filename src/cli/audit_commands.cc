// `allot audit`: who changed what, when, from where (GET /audit, newest first), and
// `allot audit export`: the log as JSON lines (GET /audit/export, oldest first, page by page).

#include <fstream>

#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/table.h"
#include "common/time_format.h"

namespace allot::cli {
namespace {

struct AuditOpts {
  std::string since;
  std::string until;
  std::string actor;
  std::string object;
  int limit = 0;
  std::string file;  // export only; "" or "-": stdout
};

// The shared filters as a query string ("&since=...&actor=..."); times are read here, as every
// other command reads them, and sent as ISO 8601.
Result<std::string> filterQuery(const AuditOpts& o, TimeMs now) {
  std::string query;
  for (auto [key, value] : {std::pair{"since", &o.since}, {"until", &o.until}}) {
    if (value->empty()) continue;
    auto t = parseTime(*value, now);
    if (!t.ok()) return t.status().withContext(std::string("--") + key);
    query += std::string("&") + key + "=" + urlEncode(formatIso8601(*t));
  }
  if (!o.actor.empty()) query += "&actor=" + urlEncode(o.actor);
  if (!o.object.empty()) query += "&object=" + urlEncode(o.object);
  return query;
}

int listAudit(Context& ctx, const AuditOpts& o) {
  auto query = filterQuery(o, ctx.now());
  if (!query.ok()) return ctx.usageError(query.status());
  if (o.limit != 0) *query += "&limit=" + std::to_string(o.limit);
  std::string path = "/audit";
  if (!query->empty()) path += "?" + query->substr(1);
  return ctx.printReply(ctx.get(path), [&](const json& entries) {
    Table table({"TIME", "ACTOR", "ADDRESS", "ACTION", "OBJECT", "STATUS"});
    for (const auto& e : entries) {
      table.addRow({text(e, "at"), text(e, "actor"), text(e, "address"), text(e, "action"),
                    text(e, "object"), std::to_string(e.value("status", 0))});
    }
    ctx.out() << (table.empty() ? "No audit entries.\n" : table.render());
  });
}

int exportAudit(Context& ctx, const AuditOpts& o) {
  auto query = filterQuery(o, ctx.now());
  if (!query.ok()) return ctx.usageError(query.status());
  std::ofstream file;
  const bool toStdout = o.file.empty() || o.file == "-";
  if (!toStdout) {
    file.open(o.file, std::ios::out | std::ios::trunc | std::ios::binary);
    if (!file) return ctx.fail(Status::Unavailable("cannot write " + o.file));
  }
  std::ostream& out = toStdout ? ctx.out() : file;
  auto api = ctx.api();
  if (!api.ok()) return ctx.fail(api.status());
  // The server sends a bounded page and says where the next starts; follow until it stops.
  std::string after = "0";
  for (;;) {
    auto page = (*api)->getRaw("/audit/export?after=" + after + *query);
    if (!page.ok()) return ctx.fail(page.status());
    out << page->body;
    after = page->header("X-Allot-Next-After");
    if (after.empty()) break;
  }
  out.flush();
  if (!out) return ctx.fail(Status::Unavailable("cannot write " + o.file));
  return 0;
}

void addFilters(CLI::App* cmd, AuditOpts& o) {
  cmd->add_option("--since", o.since, "From this time on (ISO 8601, or relative: -2h, -7d)");
  cmd->add_option("--until", o.until, "Before this time (ISO 8601, or relative)");
  cmd->add_option("--actor", o.actor, "Only changes by this user (or join:<id>, host:<name>)");
  cmd->add_option("--object", o.object,
                  "Only changes to this object and what is under it (host:gpu-01, job:42, "
                  "team:ml)");
}

}  // namespace

void addAuditCommands(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<AuditOpts>();
  auto* audit = app.add_subcommand(
      "audit", "Who changed what, when and from where, newest first (platform admin)");
  audit->require_subcommand(0, 1);
  addFilters(audit, *o);
  audit->add_option("--limit", o->limit, "At most this many entries (1-1000; default 100)")
      ->check(CLI::Range(1, 1000));

  auto e = std::make_shared<AuditOpts>();
  auto* exportCmd = audit->add_subcommand(
      "export", "The audit log as JSON lines, oldest first, one entry a line (platform admin)");
  addFilters(exportCmd, *e);
  exportCmd->add_option("-o,--out", e->file, "Write to this file (default: standard output)");
  onRun(exportCmd, ctx, e, exportAudit);

  // CLI11 runs the parent's callback after the subcommand's; keep the subcommand's action.
  audit->callback([&ctx, o, exportCmd] {
    if (exportCmd->parsed()) return;
    ctx.setAction([&ctx, o] { return listAudit(ctx, *o); });
  });
}

}  // namespace allot::cli
