// allot config show | set KEY VALUE | unset KEY: the config file `allot login` writes, without
// logging in again. Keys: team (the default team), server, ca_file. The token is set only by
// `allot login`, which checks it.

#include <algorithm>

#include "cli/commands.h"
#include "cli/table.h"
#include "common/http_client.h"

namespace allot::cli {
namespace {

struct ConfigOpts {
  std::string key;
  std::string value;
};

const std::vector<std::string> kKeys = {"team", "server", "ca_file"};

std::string* field(ConfigFile& c, const std::string& key) {
  if (key == "team") return &c.team;
  if (key == "server") return &c.server;
  if (key == "ca_file") return &c.caFile;
  return nullptr;
}

// The teams /whoami lists, and whether the caller is a platform admin (who may name any team).
Status checkTeam(Context& ctx, const std::string& team) {
  auto who = ctx.get("/whoami");
  if (!who.ok()) return who.status().withContext("cannot check team '" + team + "'");
  if (who->value("platform_admin", false)) return Status::Ok();
  std::string mine;
  const json teams = who->value("teams", json::object());  // items() must not outlive it
  for (const auto& [name, role] : teams.items()) {
    if (name == team) return Status::Ok();
    mine += (mine.empty() ? "" : ", ") + name;
  }
  return Status::InvalidArgument("team: you are not in team '" + team + "' (your teams: " +
                                 (mine.empty() ? "none" : mine) + "); nothing saved");
}

int change(Context& ctx, const ConfigOpts& o, bool unset) {
  auto path = configPath(ctx.env());
  if (!path.ok()) return ctx.fail(path.status());
  auto config = loadConfig(*path);
  if (!config.ok()) return ctx.fail(config.status());
  std::string* value = field(*config, o.key);
  if (!unset && o.key == "team") {
    if (Status st = checkTeam(ctx, o.value); !st.ok()) return ctx.fail(st);
  }
  if (!unset && o.key == "server") {
    auto parsed = parseServerUrl(o.value);
    if (!parsed.ok()) return ctx.usageError(parsed.status());
  }
  *value = unset ? "" : o.value;
  if (Status st = saveConfig(*path, *config); !st.ok()) return ctx.fail(st);
  ctx.out() << (unset ? "Unset " + o.key : "Set " + o.key + " to " + o.value) << " in " << *path
            << "\n";
  return 0;
}

int show(Context& ctx) {
  auto path = configPath(ctx.env());
  if (!path.ok()) return ctx.fail(path.status());
  auto config = loadConfig(*path);
  if (!config.ok()) return ctx.fail(config.status());
  // What commands use, with where each came from: the environment overrides the file.
  auto settings = ctx.settings();
  if (!settings.ok()) return ctx.fail(settings.status());
  auto from = [&](const std::string& inFile, const char* var) {
    if (ctx.env()(var)) return std::string(" (from $") + var + ")";
    return inFile.empty() ? std::string() : std::string(" (from the file)");
  };
  if (ctx.jsonOutput())
    return ctx.printJson({{"config_path", *path},
                          {"server", settings->server},
                          {"team", settings->team},
                          {"ca_file", settings->caFile},
                          {"token_set", !settings->token.empty()}});
  Details d;
  d.add("config file", *path);
  d.add("server", settings->server + from(config->server, "ALLOT_SERVER"));
  d.add("team", (settings->team.empty() ? "- (none: your only team)" : settings->team) +
                    from(config->team, "ALLOT_TEAM"));
  d.add("ca file", (settings->caFile.empty() ? "- (the system's CAs)" : settings->caFile) +
                       from(config->caFile, "ALLOT_CA_FILE"));
  d.add("token", settings->token.empty() ? "- (run allot login)" : "set");
  ctx.out() << d.render();
  return 0;
}

}  // namespace

void addConfigCommands(CLI::App& app, Context& ctx) {
  auto* config =
      addGroup(app, "config", "The config file: the default team, the server, the CA file");
  config->footer("The token is saved by `allot login`, which checks it with the server.");
  auto o = std::make_shared<ConfigOpts>();
  auto* showCmd = config->add_subcommand("show", "Show the settings commands use, and from where");
  onRun(showCmd, ctx, o, [](Context& c, const ConfigOpts&) { return show(c); });
  auto* set = config->add_subcommand(
      "set", "Set a key: team (the default team of run, session create, ...), server, ca_file");
  set->add_option("KEY", o->key, "team, server or ca_file")
      ->required()
      ->check(CLI::IsMember(kKeys));
  set->add_option("VALUE", o->value, "Its value")->required();
  onRun(set, ctx, o, [](Context& c, const ConfigOpts& x) { return change(c, x, false); });
  auto* unset = config->add_subcommand("unset", "Remove a key from the config file");
  unset->add_option("KEY", o->key, "team, server or ca_file")
      ->required()
      ->check(CLI::IsMember(kKeys));
  onRun(unset, ctx, o, [](Context& c, const ConfigOpts& x) { return change(c, x, true); });
}

}  // namespace allot::cli
