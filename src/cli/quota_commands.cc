// allot team quota, allot project quota: what each team is guaranteed and how it shares, and
// how a team splits its guarantee among its projects.

#include <charconv>
#include <cstdio>
#include <tuple>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/table.h"

namespace allot::cli {
namespace {

struct QuotaOpts {
  std::string team;
  std::string project;
  std::vector<std::string> gpus;  // MODEL=N entries
  std::string any;
  std::string borrowLimit;
  std::string lendLimit;
  std::string weight;
  std::string lendDedicated;
  std::vector<std::string> contourLimits;  // CONTOUR=N or CONTOUR=unlimited entries
  bool overcommit = false;
};

// --gpus and --any together give the whole guarantee; "any" is the API's key for any model.
Result<json> guaranteeBody(const QuotaOpts& o) {
  auto counts = parseGpuCounts(o.gpus);
  if (!counts.ok()) return counts.status();
  json g = json::object();
  for (const auto& [model, n] : *counts) g[model] = n;
  if (!o.any.empty()) {
    auto n = parseLimit(o.any, "--any");
    if (!n.ok() || *n < 0)
      return Status::InvalidArgument("--any '" + o.any + "': expected a number of GPUs");
    g["any"] = *n;
  }
  return g;
}

// "4x A100, 2x any model", or "0 GPUs" (no guarantee: "none" would read like "no limit", which
// is what it means for the limits).
std::string guaranteeText(const json& g) {
  if (!g.is_object() || g.empty()) return "0 GPUs";
  std::string out;
  for (const auto& [model, n] : g.items()) {
    if (!out.empty()) out += ", ";
    out += n.dump() + "x " + (model == "any" ? std::string("any model") : model);
  }
  return out;
}

std::string limitText(const json& q, const char* key, const char* none) {
  auto it = q.find(key);
  return it == q.end() || it->is_null() ? none : it->dump();
}

// 2 rather than 2.0; 2.5 stays.
std::string numberText(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return "-";
  char buf[32];
  snprintf(buf, sizeof buf, "%g", it->get<double>());
  return buf;
}

// --contour-limit prod=4 --contour-limit test=unlimited -> {"prod": 4, "test": null} ("none" is
// the older word for unlimited, still taken).
Result<json> contourLimitsBody(const std::vector<std::string>& entries) {
  json out = json::object();
  for (const auto& e : entries) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == e.size())
      return Status::InvalidArgument("--contour-limit '" + e +
                                     "': expected CONTOUR=GPUS (prod=4) or CONTOUR=unlimited");
    const std::string contour = e.substr(0, eq), value = e.substr(eq + 1);
    if (value == "unlimited" || value == "none") {
      out[contour] = nullptr;
      continue;
    }
    int n = -1;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || p != value.data() + value.size() || n < 0)
      return Status::InvalidArgument("--contour-limit '" + e +
                                     "': expected a number of GPUs or unlimited after '='");
    out[contour] = n;
  }
  return out;
}

// "prod 4, test 8", or "unlimited".
std::string contourLimitsText(const json& q) {
  auto it = q.find("contour_limits");
  if (it == q.end() || !it->is_object() || it->empty()) return "unlimited";
  std::string out;
  for (const auto& [contour, n] : it->items())
    out += (out.empty() ? "" : ", ") + contour + " " + n.dump();
  return out;
}

int quotaSet(Context& ctx, const QuotaOpts& o) {
  json body = json::object();
  if (!o.gpus.empty() || !o.any.empty()) {
    auto g = guaranteeBody(o);
    if (!g.ok()) return ctx.usageError(g.status());
    body["guaranteed"] = *g;
  }
  for (auto [flag, value, key] : {std::tuple{"--borrow-limit", &o.borrowLimit, "borrow_limit"},
                                  {"--lend-limit", &o.lendLimit, "lend_limit"}}) {
    if (value->empty()) continue;
    auto n = parseLimit(*value, flag);
    if (!n.ok()) return ctx.usageError(n.status());
    body[key] = *n < 0 ? json(nullptr) : json(*n);
  }
  if (!o.weight.empty()) {
    double w = 0;
    auto [p, ec] = std::from_chars(o.weight.data(), o.weight.data() + o.weight.size(), w);
    if (ec != std::errc() || p != o.weight.data() + o.weight.size())
      return ctx.usageError(
          Status::InvalidArgument("--weight '" + o.weight + "': expected a number, e.g. 2"));
    body["weight"] = w;
  }
  if (!o.lendDedicated.empty()) body["lend_dedicated"] = o.lendDedicated == "true";
  if (o.overcommit) body["overcommit"] = true;
  if (!o.contourLimits.empty()) {
    auto limits = contourLimitsBody(o.contourLimits);
    if (!limits.ok()) return ctx.usageError(limits.status());
    body["contour_limits"] = *limits;
  }
  if (body.empty())
    return ctx.usageError(Status::InvalidArgument(
        "nothing to set: give --gpus, --any, --borrow-limit, --lend-limit, --weight, "
        "--lend-dedicated or --contour-limit"));
  auto reply = ctx.put("/teams/" + urlEncode(o.team) + "/quota", body);
  return ctx.printReply(reply, [&](const json& team) {
    const json q = team.value("quota", json::object());
    ctx.out() << "Set the quota of team " << text(team, "name") << ": "
              << guaranteeText(q.value("guaranteed", json::object()))
              << " guaranteed, borrow limit " << limitText(q, "borrow_limit", "unlimited")
              << ", lend limit " << limitText(q, "lend_limit", "all idle") << ", weight "
              << numberText(q, "weight") << ", contour limits " << contourLimitsText(q) << "\n";
  });
}

// " (now 1.7: ...)" when the scheduler scales the guarantee down because the teams' guarantees
// exceed the pool (hosts away, or set with --overcommit); "" when it is whole.
std::string effectiveGuaranteeText(const json& q, const json& guaranteed) {
  auto st = q.find("status");
  if (st == q.end() || !st->is_object() || !st->contains("guaranteed") ||
      !(*st)["guaranteed"].is_number() || !guaranteed.is_object())
    return "";
  int configured = 0;
  for (const auto& [model, n] : guaranteed.items()) configured += n.is_number() ? n.get<int>() : 0;
  const double effective = st->value("guaranteed", json(0.0)).get<double>();
  if (effective + 0.0005 >= configured) return "";
  char buf[32];
  snprintf(buf, sizeof buf, "%.3g", effective);
  return std::string(" (now ") + buf +
         " GPUs: the teams' guarantees add up to more than the pool has, so each is scaled down "
         "in proportion)";
}

int quotaShow(Context& ctx, const QuotaOpts& o) {
  return ctx.printReply(ctx.get("/teams/" + urlEncode(o.team) + "/quota"), [&](const json& q) {
    Details d;
    d.add("team", text(q, "team"));
    const json guaranteed = q.value("guaranteed", json::object());
    d.add("guaranteed", guaranteeText(guaranteed) + effectiveGuaranteeText(q, guaranteed));
    d.add("borrow limit", limitText(q, "borrow_limit", "unlimited"));
    d.add("lend limit", limitText(q, "lend_limit", "all idle guarantee"));
    d.add("weight", numberText(q, "weight"));
    d.add("lend dedicated", isTrue(q, "lend_dedicated") ? "yes" : "no");
    d.add("contour limits", contourLimitsText(q));
    auto st = q.find("status");
    if (st != q.end() && st->is_object()) {
      d.add("in use",
            text(*st, "within") + " within guarantee, " + text(*st, "borrowed") + " borrowed");
      d.add("lendable now", text(*st, "lendable"));
      d.add("fair share", numberText(*st, "share") +
                              " (GPUs it holds now plus its recent average, per unit of weight; "
                              "when teams borrow, the lowest goes first)");
    } else {
      d.add("in use", "not known yet (no scheduling pass has looked at this team)");
    }
    ctx.out() << d.render();
    Table projects({"PROJECT", "GUARANTEED"});
    for (const auto& p : q.value("projects", json::array()))
      projects.addRow({text(p, "name"), guaranteeText(p.value("guaranteed", json::object()))});
    if (!projects.empty()) ctx.out() << "\n" << projects.render();
  });
}

int projectQuotaSet(Context& ctx, const QuotaOpts& o) {
  auto g = guaranteeBody(o);
  if (!g.ok()) return ctx.usageError(g.status());
  auto reply =
      ctx.put("/teams/" + urlEncode(o.team) + "/projects/" + urlEncode(o.project) + "/quota",
              {{"guaranteed", *g}});
  return ctx.printReplyLine(reply, [](const json& project) {
    return "Set the quota of project " + text(project, "name") + " in team " +
           text(project, "team") + ": " +
           guaranteeText(project.value("guaranteed", json::object())) + " guaranteed";
  });
}

void addGuaranteeFlags(CLI::App* cmd, QuotaOpts& o) {
  cmd->add_option("--gpus", o.gpus,
                  "Guaranteed GPUs of a model, MODEL=N (repeat, or A100=4,H100=2); with --any, "
                  "the whole guarantee: models left out lose theirs")
      ->allow_extra_args(false);
  cmd->add_option("--any", o.any, "Guaranteed GPUs usable on any model");
}

}  // namespace

void addQuotaCommands(CLI::App& app, Context& ctx) {
  auto* quota = addGroup(*app.get_subcommand("team"), "quota",
                         "A team's guaranteed GPUs, borrowing and lending, fair-share weight");
  {
    auto o = std::make_shared<QuotaOpts>();
    auto* set = quota->add_subcommand("set", "Set a team's quota (platform-admin)");
    set->add_option("TEAM", o->team, "Team name")->required();
    addGuaranteeFlags(set, *o);
    set->add_option("--borrow-limit", o->borrowLimit,
                    "Most GPUs it may use beyond its guarantee, or unlimited");
    set->add_option("--lend-limit", o->lendLimit,
                    "Most of its idle guarantee others may use, or unlimited (all of it)");
    set->add_option("--weight", o->weight, "Fair-share weight when borrowing (> 0)");
    set->add_option("--lend-dedicated", o->lendDedicated,
                    "Let others use its idle dedicated hosts and GPUs, preemptibly")
        ->check(CLI::IsMember({"true", "false"}));
    set->add_option("--contour-limit", o->contourLimits,
                    "Most GPUs its work may hold in a contour, CONTOUR=N (repeat); "
                    "CONTOUR=unlimited removes the limit; contours not given keep theirs")
        ->allow_extra_args(false);
    set->add_flag("--overcommit", o->overcommit,
                  "Accept guarantees that add up to more than the pool has (a fleet about to "
                  "grow); every team's guarantee is then scaled down in proportion");
    set->footer(
        "Example: allot team quota set ml --gpus A100=4 --any 2 --borrow-limit 4 "
        "--contour-limit prod=4");
    onRun(set, ctx, o, quotaSet);

    auto* show = quota->add_subcommand("show", "Show a team's quota and how much it uses");
    show->add_option("TEAM", o->team, "Team name")->required();
    onRun(show, ctx, o, quotaShow);
  }

  auto* pquota = addGroup(*app.get_subcommand("project"), "quota",
                          "A project's split of its team's guaranteed GPUs");
  {
    auto o = std::make_shared<QuotaOpts>();
    auto* set = pquota->add_subcommand(
        "set", "Set a project's split of its team's guarantee (team-admin, platform-admin)");
    set->add_option("PROJECT", o->project, "Project name")->required();
    set->add_option("--team", o->team, "The project's team")->required();
    addGuaranteeFlags(set, *o);
    onRun(set, ctx, o, projectQuotaSet);
  }
}

}  // namespace allot::cli
