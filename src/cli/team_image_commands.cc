// allot team default-image and allot team registry-login: what a team's work runs in when it
// names no image, and the team's logins to its registries (docs/environments.md). A login's
// password is read from the terminal without echo, or from stdin; it is never an argument (argv
// is readable by every user of the machine) and never printed back.

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/secret_input.h"
#include "cli/table.h"

namespace allot::cli {
namespace {

struct TeamImageOpts {
  std::string team;
  std::string image;
  bool host = false;
  std::string registry;
  std::string username;
};

std::string teamPath(const TeamImageOpts& o, const std::string& rest) {
  return "/teams/" + urlEncode(o.team) + rest;
}

std::string defaultImageText(const TeamImageOpts& o, const json& d) {
  const std::string image = text(d, "default_image", "");
  return image.empty() ? "Team " + o.team + "'s work runs on the host unless it names an image."
                       : "Team " + o.team + "'s work runs in " + image +
                             " unless it names another (--image host: on the host).";
}

int defaultImageSet(Context& ctx, const TeamImageOpts& o) {
  if (o.image.empty() == !o.host)
    return ctx.usageError(Status::InvalidArgument(
        o.host ? "give an image or --host, not both"
               : "give the image (REGISTRY/REPOSITORY:TAG), or --host to run on the host"));
  return ctx.printReplyLine(
      ctx.put(teamPath(o, "/default-image"), json{{"image", o.host ? "" : o.image}}),
      [&](const json& d) { return defaultImageText(o, d); });
}

int defaultImageShow(Context& ctx, const TeamImageOpts& o) {
  return ctx.printReplyLine(ctx.get(teamPath(o, "/default-image")),
                            [&](const json& d) { return defaultImageText(o, d); });
}

void printLogins(Context& ctx, const json& logins) {
  Table t({"REGISTRY", "USERNAME", "SET BY", "SET AT"});
  for (const auto& l : logins)
    t.addRow({text(l, "registry"), text(l, "username"), text(l, "set_by"), text(l, "set_at")});
  ctx.out() << t.render();
}

int loginSet(Context& ctx, const TeamImageOpts& o) {
  std::string password = readSecret(ctx, "Password for " + o.username + " at " + o.registry + ": ");
  if (password.empty())
    return ctx.usageError(Status::InvalidArgument("no password given (type it, or pipe it in)"));
  return ctx.printReplyLine(ctx.put(teamPath(o, "/registry-logins/" + urlEncode(o.registry)),
                                    json{{"username", o.username}, {"password", password}}),
                            [&](const json&) {
                              return "Team " + o.team + "'s pulls from " + o.registry +
                                     " log in as " + o.username + ".";
                            });
}

int loginList(Context& ctx, const TeamImageOpts& o) {
  return ctx.printReply(ctx.get(teamPath(o, "/registry-logins")), [&](const json& logins) {
    if (logins.empty()) {
      ctx.out() << "Team " << o.team << " has no registry logins.\n";
      return;
    }
    printLogins(ctx, logins);
  });
}

int loginRemove(Context& ctx, const TeamImageOpts& o) {
  return ctx.printReplyLine(
      ctx.del(teamPath(o, "/registry-logins/" + urlEncode(o.registry))),
      [&](const json&) { return "Removed team " + o.team + "'s login to " + o.registry + "."; });
}

}  // namespace

void addTeamImageCommands(CLI::App& app, Context& ctx) {
  CLI::App& team = *app.get_subcommand("team");
  auto o = std::make_shared<TeamImageOpts>();

  auto* def = addGroup(team, "default-image",
                       "What a team's jobs and sessions run in when they name no image");
  auto* set = def->add_subcommand(
      "set", "Set the team's default image (team-admin), within its allowed images");
  set->add_option("TEAM", o->team, "Team name")->required();
  set->add_option("IMAGE", o->image, "REGISTRY/REPOSITORY:TAG");
  set->add_flag("--host", o->host, "No default: work that names no image runs on the host");
  set->footer("Example: allot team default-image set ml registry.example.com/ml/pytorch:2.3");
  onRun(set, ctx, o, defaultImageSet);
  auto* show = def->add_subcommand("show", "Show the team's default image");
  show->add_option("TEAM", o->team, "Team name")->required();
  onRun(show, ctx, o, defaultImageShow);

  auto* login = addGroup(team, "registry-login",
                         "The team's logins to registries, used for its own pulls only");
  auto* lset = login->add_subcommand(
      "set",
      "Set the team's login to a registry (team-admin); the password is read from the "
      "terminal, or from stdin");
  lset->add_option("TEAM", o->team, "Team name")->required();
  lset->add_option("REGISTRY", o->registry, "HOST[:PORT], as image references name it")->required();
  lset->add_option("--username", o->username, "The registry account")->required();
  lset->footer(
      "Example: allot team registry-login set ml registry.example.com --username ml-puller "
      "< token.txt");
  onRun(lset, ctx, o, loginSet);
  auto* list = login->add_subcommand("list", "The registries the team has logins to");
  list->add_option("TEAM", o->team, "Team name")->required();
  onRun(list, ctx, o, loginList);
  auto* remove = login->add_subcommand("remove", "Remove the team's login to a registry");
  remove->add_option("TEAM", o->team, "Team name")->required();
  remove->add_option("REGISTRY", o->registry, "HOST[:PORT]")->required();
  onRun(remove, ctx, o, loginRemove);
}

}  // namespace allot::cli
