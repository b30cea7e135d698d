// allot team image-allow: which images a team's work may run in (GET/PUT
// /teams/{team}/image-allow, docs/environments.md).

#include "cli/commands.h"
#include "cli/format.h"

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

}  // namespace

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
