// allot profile: session profiles (GET/POST/DELETE /profiles...; docs/sessions.md): list the ones
// you may use, show one, define one for the platform or a team, delete one.

#include <sstream>
#include <stdexcept>
#include <tuple>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/table.h"
#include "common/time_format.h"

namespace allot::cli {
namespace {

struct ProfileOpts {
  std::string name;
  std::string team;
  std::string description;
  std::vector<std::string> command;
  std::vector<std::string> env;
  std::string image;
  std::string gpus, maxGpus;
  std::string cpus, maxCpus;
  std::string memory, maxMemory;
  std::string storage;
  std::string idleThreshold, idleAfter;
  std::string maxLifetime;
  std::string visibleTo;
};

std::string joined(const json& arr, const char* sep = ",") {
  std::string out;
  if (!arr.is_array()) return out;
  for (const auto& v : arr) out += (out.empty() ? "" : sep) + v.get<std::string>();
  return out;
}

std::string scope(const json& p) { return text(p, "team", "(platform)"); }

std::string gpusText(const json& r) {
  const std::string gpus = text(r, "gpus", "0");
  const int milli = r.value("gpu_milli", 1000);
  if (milli >= 1000) return gpus;
  std::ostringstream s;
  s << milli / 1000.0;
  return s.str();
}

// "4 GPUs, 8 CPUs, 32 GiB" for defaults; a 0 maximum reads "no limit".
std::string resourcesText(const json& r, bool maxima) {
  auto part = [&](const char* key, const std::string& unit, auto fmt) {
    const int64_t v = r.value(key, int64_t{0});
    if (v == 0) return (maxima ? "no " : "0 ") + unit + (maxima ? " limit" : "");
    return fmt(v) + " " + unit;
  };
  std::string gpus = maxima ? text(r, "gpus", "0") : gpusText(r);
  if (gpus == "0")
    gpus = maxima ? "no GPU limit" : "0 GPUs";
  else
    gpus += " GPUs";
  return gpus + ", " +
         part("cpu_millis", "CPUs",
              [](int64_t m) {
                std::ostringstream s;
                s << m / 1000.0;
                return s.str();
              }) +
         ", " + part("memory_mib", "memory", [](int64_t m) { return formatMib(m); });
}

int list(Context& ctx, const ProfileOpts&) {
  return ctx.printReply(ctx.get("/profiles"), [&](const json& profiles) {
    Table table({"NAME", "TEAM", "GPUS", "STORAGE", "COMMAND", "DESCRIPTION"});
    for (const auto& p : profiles) {
      table.addRow({text(p, "name"), scope(p), gpusText(p.value("defaults", json::object())),
                    joined(p.value("storage", json::array())),
                    shellJoin(p.value("command", std::vector<std::string>{})),
                    text(p, "description", "")});
    }
    ctx.out() << (table.empty() ? "No profiles.\n" : table.render());
  });
}

int show(Context& ctx, const ProfileOpts& o) {
  return ctx.printReply(ctx.get("/profiles/" + o.name), [&](const json& p) {
    Details d;
    d.add("name", text(p, "name"));
    d.add("team", scope(p));
    d.add("description", text(p, "description", ""));
    d.add("command", shellJoin(p.value("command", std::vector<std::string>{})));
    d.add("image", text(p, "image", "(the team's default, or on the host)"));
    std::string env;
    const json envDoc = p.value("env", json::object());
    for (const auto& [k, v] : envDoc.items())
      env += (env.empty() ? "" : " ") + k + "=" + v.get<std::string>();
    d.add("env", env.empty() ? "-" : env);
    d.add("defaults", resourcesText(p.value("defaults", json::object()), false));
    d.add("maxima", resourcesText(p.value("maxima", json::object()), true));
    d.add("storage", joined(p.value("storage", json::array())));
    const json idle = p.value("idle", json::object());
    d.add("idle", "under " + text(idle, "threshold_percent") + "% GPU for " + text(idle, "after"));
    const std::string lifetime = text(p, "max_lifetime", "0s");
    d.add("max lifetime", lifetime == "0s" ? "unlimited" : lifetime);
    if (p.value("team", json()).is_null()) {
      const std::string teams = joined(p.value("visible_to", json::array()));
      d.add("visible to", teams.empty() ? "every team" : teams);
    }
    d.add("created", text(p, "created_by") + ", " + relativeTime(text(p, "created_at"), ctx.now()));
    ctx.out() << d.render();
  });
}

// The request body from the flags; a bad value is a usage error naming its flag.
Result<json> createBody(const ProfileOpts& o) {
  json body = {{"name", o.name}, {"command", o.command}};
  if (!o.team.empty()) body["team"] = o.team;
  if (!o.description.empty()) body["description"] = o.description;
  auto env = parseEnvEntries(o.env);
  if (!env.ok()) return env.status().withContext("--env");
  if (!env->empty()) body["env"] = *env;
  json defaults = json::object(), maxima = json::object();
  if (!o.gpus.empty()) {
    auto g = parseGpuAmount(o.gpus);
    if (!g.ok()) return g.status().withContext("--gpus");
    defaults["gpus"] = g->gpus;
    if (g->milli < 1000) defaults["gpu_milli"] = g->milli;
  }
  if (!o.maxGpus.empty()) {
    auto g = parseLimit(o.maxGpus, "--max-gpus");
    if (!g.ok()) return g.status();
    maxima["gpus"] = *g < 0 ? 0 : *g;
  }
  for (auto [flag, value, target, key] :
       {std::tuple{"--cpus", &o.cpus, &defaults, "cpu_millis"},
        std::tuple{"--max-cpus", &o.maxCpus, &maxima, "cpu_millis"}}) {
    if (value->empty()) continue;
    auto m = parseCpuMillis(*value);
    if (!m.ok()) return m.status().withContext(flag);
    (*target)[key] = *m;
  }
  for (auto [flag, value, target] : {std::tuple{"--memory", &o.memory, &defaults},
                                     std::tuple{"--max-memory", &o.maxMemory, &maxima}}) {
    if (value->empty()) continue;
    auto m = parseMemoryMib(*value, flag);
    if (!m.ok()) return m.status();
    (*target)["memory_mib"] = *m;
  }
  if (!defaults.empty()) body["defaults"] = defaults;
  if (!maxima.empty()) body["maxima"] = maxima;
  if (!o.storage.empty()) body["storage"] = splitList(o.storage);
  json idle = json::object();
  if (!o.idleThreshold.empty()) {
    try {
      size_t used = 0;
      double pct = std::stod(o.idleThreshold, &used);
      if (used != o.idleThreshold.size()) throw std::invalid_argument("trailing");
      idle["threshold_percent"] = pct;
    } catch (const std::exception&) {
      return Status::InvalidArgument("--idle-threshold: '" + o.idleThreshold +
                                     "' is not a percentage");
    }
  }
  if (!o.idleAfter.empty()) idle["after"] = o.idleAfter;  // the server reads durations
  if (!idle.empty()) body["idle"] = idle;
  if (!o.maxLifetime.empty()) body["max_lifetime"] = o.maxLifetime;
  if (!o.visibleTo.empty()) body["visible_to"] = splitList(o.visibleTo);
  if (!o.image.empty()) body["image"] = o.image;
  return body;
}

int create(Context& ctx, const ProfileOpts& o) {
  auto body = createBody(o);
  if (!body.ok()) return ctx.usageError(body.status());
  return ctx.printReplyLine(ctx.post("/profiles", *body), [](const json& p) {
    return "Created profile " + text(p, "name") + " (" + scope(p) + ").";
  });
}

int deleteProfile(Context& ctx, const ProfileOpts& o) {
  return ctx.printReplyLine(ctx.del("/profiles/" + o.name), [](const json& p) {
    return "Deleted profile " + text(p, "name") + ".";
  });
}

}  // namespace

void addProfileCommands(CLI::App& app, Context& ctx) {
  auto* profile =
      addGroup(app, "profile",
               "Session profiles: what a session runs and within which limits (docs/sessions.md)");
  auto o = std::make_shared<ProfileOpts>();

  auto* list_ = profile->add_subcommand("list", "The profiles you may use");
  onRun(list_, ctx, o, list);

  auto* show_ = profile->add_subcommand("show", "One profile");
  show_->add_option("NAME", o->name, "The profile")->required();
  onRun(show_, ctx, o, show);

  auto* create_ = profile->add_subcommand(
      "create", "Define a profile: platform-wide (platform admin) or --team's (its team-admin)");
  create_->add_option("NAME", o->name, "Its name, unique in the cluster")->required();
  create_->add_option("--command", o->command,
                      "The program and its arguments (or give them after --)");
  create_->add_option("COMMAND", o->command, "The command, after --");
  create_->add_option("--team", o->team, "The team whose profile it is (default: platform-wide)");
  create_->add_option("--description", o->description, "What it is for");
  create_->add_option("--image", o->image,
                      "The image sessions run in, REGISTRY/REPOSITORY:TAG (default: the team's "
                      "default image, or on the host)");
  create_->add_option("--env", o->env, "Environment entry KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
  create_->add_option("--gpus", o->gpus, "Default GPUs: 1, 2, or a fraction 0.5");
  create_->add_option("--max-gpus", o->maxGpus, "Most GPUs a session may ask (none: no limit)");
  create_->add_option("--cpus", o->cpus, "Default CPUs: cores (2, 0.5) or millicores (250m)");
  create_->add_option("--max-cpus", o->maxCpus, "Most CPUs a session may ask");
  create_->add_option("--memory", o->memory, "Default memory: 512Mi, 16Gi");
  create_->add_option("--max-memory", o->maxMemory, "Most memory a session may ask");
  create_->add_option("--storage", o->storage,
                      "Allowed storage types, of local, scratch, shared (default scratch)");
  create_->add_option("--idle-threshold", o->idleThreshold,
                      "Idle below this GPU utilisation, in percent (default 5)");
  create_->add_option("--idle-after", o->idleAfter, "Idle for this long: 30m (default)");
  create_->add_option("--max-lifetime", o->maxLifetime, "A session ends after this: 12h");
  create_->add_option("--visible-to", o->visibleTo,
                      "Platform-wide only: the teams that see it, ml,cv (default: every team)");
  create_->footer(
      "Example: allot profile create torch --team ml --gpus 1 --max-gpus 4 --memory 32Gi "
      "--storage scratch,local --idle-after 1h -- /opt/venvs/torch/bin/jupyter-server");
  onRun(create_, ctx, o, create);

  auto* delete_ = profile->add_subcommand("delete", "Delete a profile");
  delete_->add_option("NAME", o->name, "The profile")->required();
  onRun(delete_, ctx, o, deleteProfile);
}

}  // namespace allot::cli
