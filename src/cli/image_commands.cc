// allot team image-allow: which images a team's work may run in (GET/PUT
// /teams/{team}/image-allow), and allot image list|prune|prepull: each host's image cache
// (docs/environments.md, "The cache").

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/table.h"

namespace allot::cli {
namespace {

struct AllowOpts {
  std::string team;
  std::vector<std::string> prefixes;
  bool none = false;
};

std::string allowPath(const AllowOpts& o) { return "/teams/" + urlEncode(o.team) + "/image-allow"; }

std::string allowText(const json& a) {
  std::string out;
  for (const auto& p : a.value("allow", json::array()))
    if (p.is_string()) out += (out.empty() ? "" : ", ") + p.get<std::string>();
  return out.empty() ? "none (jobs in images are refused)" : out;
}

int allowSet(Context& ctx, const AllowOpts& o) {
  if (o.prefixes.empty() == !o.none)
    return ctx.usageError(Status::InvalidArgument(
        o.none ? "give prefixes or --none, not both"
               : "give the prefixes the team may use (REGISTRY/REPOSITORY...), or --none"));
  return ctx.printReplyLine(ctx.put(allowPath(o), json{{"allow", o.prefixes}}), [&](const json& a) {
    return "Team " + o.team + " may run images under: " + allowText(a);
  });
}

int allowShow(Context& ctx, const AllowOpts& o) {
  return ctx.printReplyLine(ctx.get(allowPath(o)), [&](const json& a) {
    return "Team " + o.team + " may run images under: " + allowText(a);
  });
}

struct CacheOpts {
  std::string host;
  std::string image;
  std::vector<std::string> hosts;
  std::string pool;
  std::string team;  // prepull: whose registry login
};

// A byte count from the API, or "-".
std::string bytesText(const json& v) {
  return v.is_number_integer() ? formatBytes(v.get<int64_t>()) : "-";
}

std::string shortDigest(const std::string& d) {
  return d.rfind("sha256:", 0) == 0 ? d.substr(0, 7 + 12) : d;
}

int cacheList(Context& ctx, const CacheOpts& o) {
  return ctx.printReply(ctx.get("/hosts/" + urlEncode(o.host) + "/images"), [&](const json& h) {
    if (h["reported_at"].is_null()) {
      ctx.out() << "Host " << o.host << " has not reported its image cache yet.\n";
      return;
    }
    Table table({"IMAGE", "DIGEST", "SIZE", "LAST USED", "IN USE"});
    for (const auto& i : h.value("images", json::array()))
      table.addRow({text(i, "ref"), shortDigest(text(i, "digest")), bytesText(i["bytes"]),
                    relativeTime(text(i, "last_used_at", ""), ctx.now()),
                    i.value("in_use", false) ? "yes" : "no"});
    ctx.out() << table.render();
    ctx.out() << "On disk: " << bytesText(h["disk_bytes"]) << " of "
              << (h["budget_bytes"].is_null() ? std::string("no budget")
                                              : bytesText(h["budget_bytes"]) + " budget")
              << " (reported " << relativeTime(text(h, "reported_at"), ctx.now()) << ")\n";
    for (const auto& p : h.value("prepulls", json::array())) {
      ctx.out() << "Prepull " << text(p, "ref") << ": " << text(p, "state");
      if (p.value("total", int64_t{0}) > 0)
        ctx.out() << ", " << bytesText(p["bytes"]) << " of " << bytesText(p["total"]);
      if (p["message"].is_string()) ctx.out() << " (" << p["message"].get<std::string>() << ")";
      ctx.out() << "\n";
    }
    const json prunes = h.value("prunes", json::object());
    if (prunes.value("asked", int64_t{0}) > prunes.value("done", int64_t{0}))
      ctx.out() << "A prune is asked and not done yet.\n";
  });
}

int cachePrune(Context& ctx, const CacheOpts& o) {
  return ctx.printReplyLine(
      ctx.post("/hosts/" + urlEncode(o.host) + "/images/prune", json::object()), [&](const json&) {
        return "Asked host " + o.host +
               " to remove the images no job uses (allot image list --host " + o.host +
               " shows when it has)";
      });
}

int cachePrepull(Context& ctx, const CacheOpts& o) {
  if (o.hosts.empty() == o.pool.empty())
    return ctx.usageError(
        Status::InvalidArgument("name the hosts (--host, repeatable) or a pool "
                                "(--pool shared|TEAM), not both"));
  json body{{"image", o.image}};
  if (!o.hosts.empty()) body["hosts"] = o.hosts;
  if (!o.pool.empty()) body["pool"] = o.pool;
  if (!o.team.empty()) body["team"] = o.team;
  return ctx.printReplyLine(ctx.post("/images/prepull", body), [&](const json& r) {
    std::string hosts;
    for (const auto& h : r.value("hosts", json::array()))
      if (h.is_string()) hosts += (hosts.empty() ? "" : ", ") + h.get<std::string>();
    return "Asked " + hosts + " to fetch " + o.image +
           (o.team.empty() ? "" : " with team " + o.team + "'s registry login");
  });
}

}  // namespace

void addImageCacheCommands(CLI::App& app, Context& ctx) {
  if (auto* image = addGroup(app, "image", "Each host's image cache: list, prune, prepull")) {
    auto c = std::make_shared<CacheOpts>();
    auto* list = image->add_subcommand(
        "list",
        "The images a host's cache holds, their sizes and last use (platform-admin; "
        "a team's dedicated host: its members)");
    list->add_option("--host", c->host, "The host")->required();
    onRun(list, ctx, c, cacheList);
    auto* prune = image->add_subcommand(
        "prune",
        "Remove the cached images no job uses from a host (platform-admin; a team's "
        "dedicated host: its team-admins)");
    prune->add_option("--host", c->host, "The host")->required();
    onRun(prune, ctx, c, cachePrune);
    auto* prepull = image->add_subcommand(
        "prepull",
        "Fetch an image onto hosts before the jobs that will want it (platform-admin; "
        "team-admins for their team's hosts and allowed images)");
    prepull->add_option("IMAGE", c->image, "REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]")->required();
    prepull->add_option("--host", c->hosts, "A host (repeat for several)")->allow_extra_args(false);
    prepull->add_option("--pool", c->pool,
                        "Every host of a pool that runs images: shared, or a team");
    prepull->add_option("--team", c->team,
                        "Pull with this team's registry login (default: the team of each "
                        "host's pool, if any); the image must be in its allow-list, and the "
                        "hosts shared or the team's own");
    prepull->footer(
        "Example: allot image prepull registry:5000/ml/pytorch:2.3 --pool ml\n"
        "         allot image prepull registry:5000/ml/pytorch:2.3 --pool shared --team ml");
    onRun(prepull, ctx, c, cachePrepull);
  }
}

void addImageCommands(CLI::App& app, Context& ctx) {
  auto* allow = addGroup(*app.get_subcommand("team"), "image-allow",
                         "Which images a team's jobs may run in (by reference prefix)");
  auto o = std::make_shared<AllowOpts>();
  auto* set = allow->add_subcommand(
      "set", "Set the prefixes of the images a team may use (platform-admin); replaces the list");
  set->add_option("TEAM", o->team, "Team name")->required();
  set->add_option("PREFIX", o->prefixes,
                  "REGISTRY[/REPOSITORY...]: images under it, e.g. registry:5000/ml/");
  set->add_flag("--none", o->none, "Allow no image at all");
  set->footer(
      "Example: allot team image-allow set ml registry.example.com/ml/ "
      "registry.example.com/base/cuda");
  onRun(set, ctx, o, allowSet);
  auto* show = allow->add_subcommand("show", "Show the prefixes of the images a team may use");
  show->add_option("TEAM", o->team, "Team name")->required();
  onRun(show, ctx, o, allowShow);
}

}  // namespace allot::cli
