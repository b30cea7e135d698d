// allot login, allot whoami.

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/secret_input.h"
#include "cli/table.h"

namespace allot::cli {
namespace {

struct LoginOpts {
  bool noVerify = false;
  std::string user;  // log in with a password instead of a token
  std::string team;  // the default team to save
};

// The teams /whoami lists for the caller.
std::vector<std::string> teamsOf(const json& who) {
  std::vector<std::string> out;
  const json teams = who.value("teams", json::object());  // items() must not outlive it
  for (const auto& [team, role] : teams.items()) out.push_back(team);
  return out;
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// login's server: flag, environment, the current config file, default. A broken config file does
// not stop a login, which replaces it.
std::string loginServer(Context& ctx) {
  if (!ctx.flags.server.empty()) return ctx.flags.server;
  if (auto s = ctx.env()("ALLOT_SERVER")) return *s;
  if (auto path = configPath(ctx.env()); path.ok()) {
    if (auto file = loadConfig(*path); file.ok() && !file->server.empty()) return file->server;
  }
  return kDefaultServer;
}

// login's token: the flag, else one line from stdin, so it need not sit in shell history.
std::string loginToken(Context& ctx) {
  if (!ctx.flags.token.empty()) return ctx.flags.token;
  if (::isatty(STDIN_FILENO)) ctx.err() << "Token: " << std::flush;
  std::string line;
  std::getline(ctx.in(), line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

// "platform admin; ml: member, cv: viewer", from /whoami.
std::string rolesSummary(const json& who) {
  std::string out = who.value("platform_admin", false) ? "platform admin" : "";
  std::string teams;
  const json roles = who.value("teams", json::object());
  for (const auto& [team, role] : roles.items())
    teams += (teams.empty() ? "" : ", ") + team + ": " + role.get<std::string>();
  if (!teams.empty()) out += (out.empty() ? "" : "; ") + teams;
  return out.empty() ? "no team" : out;
}

int login(Context& ctx, const LoginOpts& o) {
  std::string server = loginServer(ctx);
  auto parsed = parseServerUrl(server);
  if (!parsed.ok()) return ctx.usageError(parsed.status());
  server = parsed->text;
  std::string token;
  if (!o.user.empty()) {
    if (!ctx.flags.token.empty())
      return ctx.usageError(Status::InvalidArgument("--user and --token: give one of them"));
    // The password buys an API token (named "login"), saved as a given token would be.
    std::string password = readSecret(ctx, "Password for " + o.user + ": ");
    if (password.empty())
      return ctx.usageError(Status::InvalidArgument("no password given (terminal or stdin)"));
    auto http = HttpClient::create(server, "");
    if (!http.ok()) return ctx.fail(http.status());
    ApiClient api(std::move(http.value()));
    auto res = api.post("/login", {{"user", o.user}, {"password", password}, {"session", false}});
    if (!res.ok()) return ctx.fail(res.status().withContext("login failed, nothing saved"));
    token = text(*res, "token", "");
  } else {
    token = loginToken(ctx);
  }
  if (token.empty()) {
    return ctx.usageError(Status::InvalidArgument(
        "no token given: use `allot login --server URL --token TOKEN` or type it on stdin"));
  }
  auto path = configPath(ctx.env());
  if (!path.ok()) return ctx.fail(path.status());

  // The CA a login used is saved with it, so later commands verify the same server the same way.
  std::string caFile = ctx.flags.caFile;
  if (caFile.empty()) caFile = ctx.env()("ALLOT_CA_FILE").value_or("");
  json who = nullptr;
  if (!o.noVerify) {
    HttpClientOptions options;
    options.caFile = caFile;
    auto http = HttpClient::create(server, token, options);
    if (!http.ok()) return ctx.fail(http.status());
    ApiClient api(std::move(http.value()));
    auto res = api.get("/whoami");
    if (!res.ok()) return ctx.fail(res.status().withContext("login failed, nothing saved"));
    who = *res;
  }
  // The default team: the one named, checked against the caller's teams; else the one saved
  // before for this server, so that logging in again does not forget it.
  std::string team = o.team;
  const auto teams = who.is_null() ? std::vector<std::string>{} : teamsOf(who);
  if (!team.empty() && !who.is_null() && !who.value("platform_admin", false) &&
      std::find(teams.begin(), teams.end(), team) == teams.end())
    return ctx.usageError(Status::InvalidArgument(
        "--team: you are not in team '" + team +
        "' (your teams: " + (teams.empty() ? "none" : joinNames(teams)) + "); nothing saved"));
  if (team.empty()) {
    if (auto old = loadConfig(*path); old.ok() && old->server == server) team = old->team;
  }
  if (Status st = saveConfig(*path, ConfigFile{server, token, caFile, team}); !st.ok())
    return ctx.fail(st);

  if (ctx.jsonOutput()) {
    return ctx.printJson({{"server", server}, {"config_path", *path}, {"user", who}});
  }
  if (who.is_null()) {
    ctx.out() << "Saved server " << server << " and token to " << *path << " (not verified)\n";
  } else {
    ctx.out() << "Logged in to " << server << " as " << text(who, "name") << " ("
              << rolesSummary(who) << "). Saved to " << *path << "\n";
  }
  if (!team.empty()) {
    ctx.out() << "Default team: " << team << "\n";
  } else if (teams.size() > 1) {
    ctx.out() << "You are in several teams (" << joinNames(teams)
              << "): name one with --team, or set a default: allot config set team NAME\n";
  }
  return 0;
}

int whoami(Context& ctx) {
  return ctx.printReply(ctx.get("/whoami"), [&](const json& who) {
    Details d;
    d.add("name", text(who, "name"));
    d.add("roles", rolesSummary(who));
    d.add("server", ctx.serverUrl());
    ctx.out() << d.render();
  });
}

}  // namespace

void addAuthCommands(CLI::App& app, Context& ctx) {
  auto loginOpts = std::make_shared<LoginOpts>();
  auto* loginCmd = app.add_subcommand(
      "login", "Save a server and token to the config file (checks them with the server first)");
  loginCmd->footer(
      "The token comes from --token, or from one line on stdin when --token is not given.\n"
      "With --user, the password is asked instead and the server issues a token (30 days by\n"
      "default).\n"
      "The server comes from --server, ALLOT_SERVER, the current config, or the default.");
  loginCmd->add_flag("--no-verify", loginOpts->noVerify, "Save without asking the server");
  loginCmd->add_option("--user", loginOpts->user,
                       "Log in with this user's password (asked without echo, or one line on "
                       "stdin) and save the API token it earns");
  loginCmd->add_option("--team", loginOpts->team,
                       "Save this team as the default of commands that act for one (run, session "
                       "create, ...); you must be in it");
  onRun(loginCmd, ctx, loginOpts, login);

  auto* whoamiCmd = app.add_subcommand("whoami", "Show who the token belongs to");
  onRun(whoamiCmd, ctx, std::make_shared<int>(0), [](Context& c, int) { return whoami(c); });
}

}  // namespace allot::cli
