// allot team, allot user, allot project: who may use the fleet, and under what names.

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/table.h"

namespace allot::cli {
namespace {

struct NameOpts {
  std::string name;
  std::string team;
  std::string role = "member";
};

// GET `path` and print the array as JSON or as a table of `columns` (API field names).
int listObjects(Context& ctx, const std::string& path, const std::vector<std::string>& columns) {
  auto api = ctx.api();
  if (!api.ok()) return ctx.fail(api.status());
  auto list = (*api)->get(path);
  if (!list.ok()) return ctx.fail(list.status());
  if (ctx.jsonOutput()) return ctx.printJson(*list);
  std::vector<std::string> headers;
  for (const auto& c : columns) {
    std::string h = c == "created_at" ? "CREATED" : c;
    for (char& ch : h) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    headers.push_back(h);
  }
  Table table(headers);
  for (const auto& item : *list) {
    std::vector<std::string> row;
    for (const auto& c : columns) {
      row.push_back(c == "created_at" ? relativeTime(text(item, "created_at", ""), ctx.now())
                                      : text(item, c.c_str()));
    }
    table.addRow(std::move(row));
  }
  ctx.out() << table.render();
  return 0;
}

int create(Context& ctx, const std::string& path, const json& body, const std::string& what) {
  auto api = ctx.api();
  if (!api.ok()) return ctx.fail(api.status());
  auto made = (*api)->post(path, body);
  if (!made.ok()) return ctx.fail(made.status());
  if (ctx.jsonOutput()) return ctx.printJson(*made);
  ctx.out() << "Created " << what << " " << text(*made, "name");
  if (std::string team = text(*made, "team", ""); !team.empty() && what != "team") {
    ctx.out() << " in team " << team;
  }
  ctx.out() << "\n";
  return 0;
}

int userCreate(Context& ctx, const NameOpts& o) {
  if (o.team.empty() && o.role != "platform-admin") {
    return ctx.usageError(Status::InvalidArgument("--team is required for a " + o.role));
  }
  json body = {{"name", o.name}, {"role", o.role}};
  if (!o.team.empty()) body["team"] = o.team;
  auto api = ctx.api();
  if (!api.ok()) return ctx.fail(api.status());
  auto made = (*api)->post("/users", body);
  if (!made.ok()) return ctx.fail(made.status());
  // Showing the token is this command's purpose: it exists nowhere else.
  if (ctx.jsonOutput()) return ctx.printJson(*made);
  std::string token = text(*made, "token", "");
  ctx.out() << "Created user " << text(*made, "name") << " (team " << text(*made, "team") << ", "
            << text(*made, "role") << ").\n"
            << "Token: " << token << "\n"
            << "Keep it now: it will not be shown again. The user logs in with:\n"
            << "  allot login --server " << (*api)->serverUrl() << " --token " << token << "\n";
  return 0;
}

}  // namespace

void addOrgCommands(CLI::App& app, Context& ctx) {
  auto* team = app.add_subcommand("team", "Teams: the unit that owns projects and jobs");
  team->require_subcommand(1);
  {
    auto o = std::make_shared<NameOpts>();
    auto* cmd = team->add_subcommand("create", "Create a team (platform-admin)");
    cmd->add_option("NAME", o->name, "Team name")->required();
    onRun(cmd, ctx, o, [](Context& c, const NameOpts& x) {
      return create(c, "/teams", {{"name", x.name}}, "team");
    });
    auto* list = team->add_subcommand("list", "List teams");
    onRun(list, ctx, o, [](Context& c, const NameOpts&) {
      return listObjects(c, "/teams", {"name", "created_at"});
    });
  }

  auto* user = app.add_subcommand("user", "Users and their API tokens");
  user->require_subcommand(1);
  {
    auto o = std::make_shared<NameOpts>();
    auto* cmd = user->add_subcommand("create",
                                     "Create a user and print their token, once (platform-admin)");
    cmd->add_option("NAME", o->name, "User name")->required();
    cmd->add_option("--team", o->team, "The user's team (required for a member)");
    cmd->add_option("--role", o->role,
                    "member, team-admin (also manages the team's projects and their quotas) or "
                    "platform-admin")
        ->check(CLI::IsMember({"member", "team-admin", "platform-admin"}))
        ->capture_default_str();
    onRun(cmd, ctx, o, userCreate);
    auto* list = user->add_subcommand("list", "List users");
    onRun(list, ctx, o, [](Context& c, const NameOpts&) {
      return listObjects(c, "/users", {"name", "team", "role", "created_at"});
    });
  }

  auto* project = app.add_subcommand("project", "Projects: how a team labels its jobs");
  project->require_subcommand(1);
  {
    auto o = std::make_shared<NameOpts>();
    auto* cmd = project->add_subcommand("create", "Create a project");
    cmd->add_option("NAME", o->name, "Project name")->required();
    cmd->add_option("--team", o->team, "Owning team (default: yours)");
    onRun(cmd, ctx, o, [](Context& c, const NameOpts& x) {
      json body = {{"name", x.name}};
      if (!x.team.empty()) body["team"] = x.team;
      return create(c, "/projects", body, "project");
    });
    auto* list = project->add_subcommand("list", "List projects");
    onRun(list, ctx, o, [](Context& c, const NameOpts&) {
      return listObjects(c, "/projects", {"name", "team", "created_at"});
    });
  }
}

}  // namespace allot::cli
