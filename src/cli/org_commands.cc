// allot team, allot user, allot project: who may use the fleet, and under what names.

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/secret_input.h"
#include "cli/table.h"

namespace allot::cli {
namespace {

struct NameOpts {
  std::string name;
  std::string team;
  std::string role = "member";
  bool platformAdmin = false;
  bool service = false;
  bool passwordStdin = false;
};

struct PasswdOpts {
  std::string name;  // "" = oneself
};

struct UserUpdateOpts {
  std::string name;
  std::string platformAdmin;  // "true" / "false" / "" (keep)
  std::string disabled;
};

struct MemberOpts {
  std::string team;
  std::string user;
  std::string role = "member";
};

// {"ml": "member", "cv": "viewer"} as "cv:viewer,ml:member".
std::string teamRoles(const json& teams) {
  std::string out;
  if (!teams.is_object()) return out;
  for (const auto& [team, role] : teams.items())
    out += (out.empty() ? "" : ",") + team + ":" + role.get<std::string>();
  return out;
}

// GET `path` and print the array as JSON or as a table of `columns` (API field names).
int listObjects(Context& ctx, const std::string& path, const std::vector<std::string>& columns) {
  return ctx.printReply(ctx.get(path), [&](const json& list) {
    std::vector<std::string> headers;
    for (const auto& c : columns) {
      std::string h = c == "created_at" ? "CREATED" : c;
      for (char& ch : h) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      headers.push_back(h);
    }
    Table table(headers);
    for (const auto& item : list) {
      std::vector<std::string> row;
      for (const auto& c : columns) {
        row.push_back(c == "created_at" ? relativeTime(text(item, "created_at", ""), ctx.now())
                                        : text(item, c.c_str()));
      }
      table.addRow(std::move(row));
    }
    ctx.out() << table.render();
  });
}

int create(Context& ctx, const std::string& path, const json& body, const std::string& what) {
  return ctx.printReplyLine(ctx.post(path, body), [&](const json& made) {
    std::string line = "Created " + what + " " + text(made, "name");
    if (std::string team = text(made, "team", ""); !team.empty() && what != "team") {
      line += " in team " + team;
    }
    return line;
  });
}

int userCreate(Context& ctx, const NameOpts& o) {
  const bool admin = o.platformAdmin || o.role == "platform-admin";
  if (o.team.empty() && !admin) {
    return ctx.usageError(Status::InvalidArgument("--team is required for a " + o.role));
  }
  json body = {{"name", o.name}, {"platform_admin", admin}};
  if (!o.team.empty()) {
    body["team"] = o.team;
    body["role"] = o.role == "platform-admin" ? "team-admin" : o.role;
  }
  if (o.service) body["kind"] = "service";
  if (o.passwordStdin) {
    std::string password = readSecret(ctx, "Password for " + o.name + ": ");
    if (password.empty())
      return ctx.usageError(Status::InvalidArgument("--password-stdin: no password on stdin"));
    body["password"] = password;
  }
  // Showing the token is this command's purpose: it exists nowhere else.
  return ctx.printReply(ctx.post("/users", body), [&](const json& made) {
    std::string token = text(made, "token", "");
    std::string teams = teamRoles(made.value("teams", json::object()));
    ctx.out() << "Created " << (o.service ? "service account " : "user ") << text(made, "name")
              << " (" << (teams.empty() ? "no team" : "teams " + teams)
              << (admin ? ", platform admin" : "") << ").\n"
              << "Token: " << token << "\n"
              << "Keep it now: it will not be shown again. The user logs in with:\n"
              << "  allot login --server " << ctx.serverUrl() << " --token " << token << "\n";
  });
}

// Oneself: the current password, then the new one twice. Another user (platform admins): the new
// one twice. On a terminal without echo; otherwise one line each from stdin.
int userPasswd(Context& ctx, const PasswdOpts& o) {
  auto me = ctx.get("/whoami");
  if (!me.ok()) return ctx.fail(me.status());
  const std::string name = o.name.empty() ? text(*me, "name") : o.name;
  json body = json::object();
  if (text(*me, "name") == name) body["current_password"] = readSecret(ctx, "Current password: ");
  std::string password = readSecret(ctx, "New password for " + name + ": ");
  std::string again = readSecret(ctx, "Repeat it: ");
  if (password != again)
    return ctx.usageError(Status::InvalidArgument("the two new passwords differ; nothing changed"));
  body["password"] = password;
  return ctx.printReplyLine(ctx.put("/users/" + urlEncode(name) + "/password", body),
                            [&](const json&) { return "Password of " + name + " changed"; });
}

int userList(Context& ctx) {
  return ctx.printReply(ctx.get("/users"), [&](const json& users) {
    Table table({"NAME", "KIND", "SOURCE", "TEAMS", "ADMIN", "DISABLED", "CREATED"});
    for (const auto& u : users) {
      table.addRow({text(u, "name"), text(u, "kind"), text(u, "source"),
                    teamRoles(u.value("teams", json::object())),
                    u.value("platform_admin", false) ? "yes" : "",
                    u.value("disabled", false) ? "yes" : "",
                    relativeTime(text(u, "created_at", ""), ctx.now())});
    }
    ctx.out() << table.render();
  });
}

int userShow(Context& ctx, const std::string& name) {
  return ctx.printReply(ctx.get("/users/" + urlEncode(name)), [&](const json& u) {
    Details d;
    d.add("name", text(u, "name"));
    d.add("kind", text(u, "kind"));
    d.add("source", text(u, "source"));
    d.add("teams", teamRoles(u.value("teams", json::object())));
    d.add("platform admin", u.value("platform_admin", false) ? "yes" : "no");
    d.add("password", u.value("has_password", false) ? "set" : "none");
    d.add("disabled", u.value("disabled", false) ? "yes" : "no");
    d.add("uid", text(u, "uid"));
    d.add("created", text(u, "created_at"));
    ctx.out() << d.render();
  });
}

int userUpdate(Context& ctx, const UserUpdateOpts& o) {
  json body = json::object();
  if (!o.platformAdmin.empty()) body["platform_admin"] = o.platformAdmin == "true";
  if (!o.disabled.empty()) body["disabled"] = o.disabled == "true";
  if (body.empty())
    return ctx.usageError(
        Status::InvalidArgument("nothing to change: give --platform-admin or --disabled"));
  return ctx.printReplyLine(ctx.patch("/users/" + urlEncode(o.name), body), [&](const json& u) {
    return "Updated user " + o.name + ": platform admin " +
           (u.value("platform_admin", false) ? "yes" : "no") + ", disabled " +
           (u.value("disabled", false) ? "yes" : "no");
  });
}

int teamMembers(Context& ctx, const std::string& team) {
  return ctx.printReply(ctx.get("/teams/" + urlEncode(team) + "/members"), [&](const json& list) {
    Table table({"USER", "ROLE", "KIND", "SOURCE"});
    for (const auto& m : list)
      table.addRow({text(m, "user"), text(m, "role"), text(m, "kind"), text(m, "source")});
    ctx.out() << table.render();
  });
}

std::string memberPath(const MemberOpts& o) {
  return "/teams/" + urlEncode(o.team) + "/members/" + urlEncode(o.user);
}

int addMember(Context& ctx, const MemberOpts& o) {
  return ctx.printReplyLine(ctx.put(memberPath(o), {{"role", o.role}}), [&](const json&) {
    return o.user + " is now " + o.role + " of team " + o.team;
  });
}

int removeMember(Context& ctx, const MemberOpts& o) {
  return ctx.printReplyLine(ctx.del(memberPath(o)), [&](const json&) {
    return "Removed " + o.user + " from team " + o.team;
  });
}

}  // namespace

void addOrgCommands(CLI::App& app, Context& ctx) {
  auto* team = addGroup(app, "team", "Teams: the unit that owns projects and jobs");
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
    auto* members = team->add_subcommand("members", "List a team's members and their roles");
    members->add_option("TEAM", o->name, "Team")->required();
    onRun(members, ctx, o, [](Context& c, const NameOpts& x) { return teamMembers(c, x.name); });

    auto m = std::make_shared<MemberOpts>();
    auto* add = team->add_subcommand(
        "add-member", "Add a user to a team, or change their role in it (team-admin)");
    add->add_option("TEAM", m->team, "Team")->required();
    add->add_option("USER", m->user, "User")->required();
    add->add_option("--role", m->role,
                    "viewer (reads the team's work), member (also submits and cancels their own) "
                    "or team-admin (also runs the team)")
        ->check(CLI::IsMember({"viewer", "member", "team-admin"}))
        ->capture_default_str();
    onRun(add, ctx, m, addMember);
    auto* remove = team->add_subcommand("remove-member", "Remove a user from a team (team-admin)");
    remove->add_option("TEAM", m->team, "Team")->required();
    remove->add_option("USER", m->user, "User")->required();
    onRun(remove, ctx, m, removeMember);
  }

  auto* user = addGroup(app, "user", "Users and their API tokens");
  {
    auto o = std::make_shared<NameOpts>();
    auto* cmd = user->add_subcommand("create",
                                     "Create a user and print their token, once (platform-admin)");
    cmd->add_option("NAME", o->name, "User name")->required();
    cmd->add_option("--team", o->team,
                    "The user's first team (required unless a platform admin); more with "
                    "`allot team add-member`");
    cmd->add_option("--role", o->role,
                    "Role in --team: viewer, member, team-admin (also runs the team); "
                    "platform-admin is the same as --platform-admin")
        ->check(CLI::IsMember({"viewer", "member", "team-admin", "platform-admin"}))
        ->capture_default_str();
    cmd->add_flag("--platform-admin", o->platformAdmin, "May do everything");
    cmd->add_flag("--service", o->service,
                  "A service account for CI and automation: tokens only, no password (team-admins "
                  "may create them for their teams)");
    cmd->add_flag("--password-stdin", o->passwordStdin,
                  "Give the user a password for `allot login --user` and the console: asked "
                  "without echo on a terminal, else one line from stdin");
    onRun(cmd, ctx, o, userCreate);
    auto pw = std::make_shared<PasswdOpts>();
    auto* passwd = user->add_subcommand(
        "passwd", "Change your password, or (platform-admin) set another user's");
    passwd->add_option("NAME", pw->name, "User (default: yourself)");
    onRun(passwd, ctx, pw, userPasswd);
    auto* list = user->add_subcommand("list", "List the users you may see");
    onRun(list, ctx, o, [](Context& c, const NameOpts&) { return userList(c); });
    auto* show = user->add_subcommand("show", "Show one user");
    show->add_option("NAME", o->name, "User name")->required();
    onRun(show, ctx, o, [](Context& c, const NameOpts& x) { return userShow(c, x.name); });

    auto u = std::make_shared<UserUpdateOpts>();
    auto* update = user->add_subcommand("update", "Change an account (platform-admin)");
    update->add_option("NAME", u->name, "User name")->required();
    update->add_option("--platform-admin", u->platformAdmin, "true or false")
        ->check(CLI::IsMember({"true", "false"}));
    update
        ->add_option("--disabled", u->disabled,
                     "true: the user can no longer authenticate; their work stays on record")
        ->check(CLI::IsMember({"true", "false"}));
    onRun(update, ctx, u, userUpdate);
  }

  auto* project = addGroup(app, "project", "Projects: how a team labels its jobs");
  {
    auto o = std::make_shared<NameOpts>();
    auto* cmd = project->add_subcommand("create", "Create a project");
    cmd->add_option("NAME", o->name, "Project name")->required();
    cmd->add_option("--team", o->team,
                    "Owning team (default: your default team, or your only one)");
    onRun(cmd, ctx, o, [](Context& c, const NameOpts& x) {
      json body = {{"name", x.name}};
      if (auto team = c.teamOr(x.team); !team.empty()) body["team"] = team;
      return create(c, "/projects", body, "project");
    });
    auto* list = project->add_subcommand("list", "List projects");
    onRun(list, ctx, o, [](Context& c, const NameOpts&) {
      return listObjects(c, "/projects", {"name", "team", "created_at"});
    });
  }
}

}  // namespace allot::cli
