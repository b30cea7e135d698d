// allot host: the shared pool of GPU hosts (join tokens: host_join_commands.cc).

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/table.h"
#include "common/time_format.h"

namespace allot::cli {
namespace {

struct HostOpts {
  std::string name;
  std::string team;
  int gpu = -1;
  std::string dedicate;
  bool undedicate = false;
  std::string contour;
  bool shared = false;
  bool exclusive = false;
  std::string from, to, resolution = "minute";
};

// "nvml", or "SIMULATED" in capitals when the GPUs are not real, so nobody mistakes a test host
// for hardware.
std::string providerText(const json& host) {
  std::string provider = text(host, "gpu_provider", "");
  auto sim = host.find("simulated");
  if (sim != host.end() && sim->is_boolean() && sim->get<bool>()) {
    return provider.empty() || provider == "simulated" ? "SIMULATED" : provider + " (SIMULATED)";
  }
  return provider.empty() ? "-" : provider;
}

// "8x H100 80GB HBM3", "2x A100, 1x T4", "0".
std::string gpuSummary(const json& host) {
  auto gpus = host.find("gpus");
  if (gpus == host.end() || !gpus->is_array() || gpus->empty()) return "0";
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& g : *gpus) {
    std::string model = text(g, "model", "?");
    auto it = std::find_if(counts.begin(), counts.end(), [&](auto& p) { return p.first == model; });
    if (it == counts.end())
      counts.emplace_back(model, 1);
    else
      ++it->second;
  }
  std::string out;
  for (const auto& [model, n] : counts) {
    if (!out.empty()) out += ", ";
    out += std::to_string(n) + "x " + model;
  }
  return out;
}

std::string memoryText(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return "-";
  return formatMib(it->get<int64_t>());
}

// The host's lease (now, or the next approved one): "7 active to 2026-12-01T10:00:00Z".
std::string leaseText(const json& h, bool full) {
  auto it = h.find("lease");
  if (it == h.end() || !it->is_object()) return "-";
  const json& l = *it;
  const std::string id = l.contains("id") && l["id"].is_number() ? text(l, "id") : "(other team)";
  const std::string state = text(l, "state");
  std::string out = id + " " + state;
  if (full) {
    if (l.contains("team") && l["team"].is_string()) out += ", team " + text(l, "team");
    return out + ", " + text(l, "start") + " to " + text(l, "end");
  }
  return out + (state == "active" ? " to " + text(l, "end") : " from " + text(l, "start"));
}

int hostList(Context& ctx) {
  return ctx.printReply(ctx.get("/hosts"), [&](const json& hosts) {
    Table table({"NAME", "STATE", "ADMIN", "POOL", "CONTOUR", "LEASE", "GPUS", "DRIVER", "CUDA",
                 "PROVIDER", "CPUS", "MEMORY", "AGENT", "LAST SEEN"});
    for (const auto& h : hosts) {
      table.addRow({text(h, "name"), text(h, "state"), text(h, "admin_state", "available"),
                    text(h, "pool", "shared"), text(h, "contour"), leaseText(h, false),
                    gpuSummary(h), text(h, "driver_version"), text(h, "cuda_version"),
                    providerText(h), text(h, "cpus"), memoryText(h, "memory_mib"),
                    text(h, "agent_version"),
                    relativeTime(text(h, "last_seen_at", ""), ctx.now())});
    }
    ctx.out() << table.render();
  });
}

int hostShow(Context& ctx, const HostOpts& o) {
  auto host = ctx.get("/hosts/" + urlEncode(o.name));
  if (!host.ok()) return ctx.fail(host.status());
  if (ctx.jsonOutput()) return ctx.printJson(*host);
  const json& h = *host;
  Details d;
  d.add("name", text(h, "name"));
  d.add("state", text(h, "state"));
  d.add("admin state", text(h, "admin_state", "available"));
  if (h.contains("drain_deadline"))
    d.add("drain deadline", h["drain_deadline"].is_string()
                                ? timeText(h, "drain_deadline", ctx.now())
                                : std::string("none (running work may finish)"));
  if (!text(h, "admin_reason", "").empty()) d.add("admin reason", text(h, "admin_reason"));
  d.add("dedicated to", text(h, "dedicated_to", "- (shared pool)"));
  d.add("contour", text(h, "contour"));
  d.add("lease", leaseText(h, true));
  d.add("gpu provider", providerText(h));
  d.add("driver", text(h, "driver_version"));
  d.add("cuda", text(h, "cuda_version"));
  d.add("cpus", text(h, "cpus"));
  d.add("memory", memoryText(h, "memory_mib"));
  d.add("cgroup", text(h, "cgroup"));
  d.add("agent version", text(h, "agent_version"));
  d.add("joined", timeText(h, "joined_at", ctx.now()));
  d.add("last seen", timeText(h, "last_seen_at", ctx.now()));
  static const std::set<std::string> kShown = {
      "name",           "state",        "simulated",      "gpu_provider", "cpus",
      "memory_mib",     "cgroup",       "agent_version",  "joined_at",    "last_seen_at",
      "gpus",           "allocations",  "dedicated_to",   "admin_state",  "admin_reason",
      "drain_deadline", "drain_reason", "driver_version", "cuda_version", "lease",
      "contour"};
  d.addOthers(h, kShown);
  ctx.out() << d.render();

  // Holders per GPU (several when fractions share it); a holder of a team the caller cannot
  // see comes without names.
  auto holderText = [](const json& holders) -> std::string {
    std::string out;
    for (const auto& a : holders) {
      json job = {{"id", a.value("job_id", json(nullptr))}};
      if (!out.empty()) out += ", ";
      out += jobIdText(job) + " (" + text(a, "team") + "/" + text(a, "project") + "/" +
             text(a, "user") + ")";
    }
    return out.empty() ? "-" : out;
  };
  // A reading of the GPU's current telemetry, "-" when absent (no recent sample).
  auto reading = [](const json& g, const char* key, const char* unit) -> std::string {
    auto t = g.find("telemetry");
    if (t == g.end() || !t->contains(key) || !(*t)[key].is_number()) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f%s", (*t)[key].get<double>(), unit);
    return buf;
  };
  auto memUsed = [](const json& g) -> std::string {
    auto t = g.find("telemetry");
    if (t == g.end()) return "-";
    return memoryText(*t, "memory_used_mib");
  };
  Table gpus({"GPU", "MODEL", "MEMORY", "NUMA", "DRIVER", "CUDA", "UUID", "DEDICATED", "MODE",
              "UTIL", "MEM USED", "TEMP", "POWER", "HELD BY"});
  for (const auto& g : h.value("gpus", json::array())) {
    gpus.addRow({text(g, "index"), text(g, "model"), memoryText(g, "memory_mib"),
                 text(g, "numa_node"), text(g, "driver_version"), text(g, "cuda_version"),
                 text(g, "uuid"), text(g, "dedicated_to"),
                 isTrue(g, "shared") ? "shared" : "exclusive", reading(g, "utilization_pct", "%"),
                 memUsed(g), reading(g, "temperature_c", "C"), reading(g, "power_w", "W"),
                 holderText(g.value("holders", json::array()))});
  }
  ctx.out() << "\n" << (gpus.empty() ? std::string("no GPUs\n") : gpus.render());
  return 0;
}

int dedicate(Context& ctx, const HostOpts& o, const std::string& team) {
  auto reply = ctx.put("/hosts/" + urlEncode(o.name) + "/dedication",
                       {{"team", team.empty() ? json(nullptr) : json(team)}});
  return ctx.printReplyLine(reply, [&](const json&) {
    return team.empty() ? "Host " + o.name + " is back in the shared pool"
                        : "Host " + o.name + " is dedicated to team " + team +
                              "; other teams no longer see it";
  });
}

int setContour(Context& ctx, const HostOpts& o) {
  auto reply = ctx.put("/hosts/" + urlEncode(o.name) + "/contour", {{"contour", o.contour}});
  return ctx.printReplyLine(reply, [&](const json& host) {
    return "Host " + o.name + " is in contour " + text(host, "contour") +
           "; it takes only work of that contour";
  });
}

int gpuSettings(Context& ctx, const HostOpts& o) {
  json body = json::object();
  if (!o.dedicate.empty()) body["dedicated_to"] = o.dedicate;
  if (o.undedicate) body["dedicated_to"] = nullptr;
  if (o.shared) body["shared"] = true;
  if (o.exclusive) body["shared"] = false;
  if (body.empty())
    return ctx.usageError(Status::InvalidArgument(
        "nothing to set: give --dedicate TEAM, --undedicate, --shared or --exclusive"));
  auto reply = ctx.put("/hosts/" + urlEncode(o.name) + "/gpus/" + std::to_string(o.gpu), body);
  return ctx.printReply(reply, [&](const json& host) {
    for (const auto& g : host.value("gpus", json::array())) {
      if (g.value("index", -1) != o.gpu) continue;
      std::string team = text(g, "dedicated_to", "");
      ctx.out() << "GPU " << o.gpu << " of host " << o.name << ": "
                << (team.empty() ? "not dedicated" : "dedicated to team " + team) << ", "
                << (isTrue(g, "shared") ? "shared" : "exclusive") << "\n";
    }
  });
}

// A number from a history point with `decimals` places, "-" when null.
std::string pointNumber(const json& p, const char* key, int decimals) {
  auto it = p.find(key);
  if (it == p.end() || !it->is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, it->get<double>());
  return buf;
}

int gpuHistory(Context& ctx, const HostOpts& o) {
  auto window = windowQuery(o.from, o.to, ctx.now());
  if (!window.ok()) return ctx.usageError(window.status());
  const std::string query = "?resolution=" + urlEncode(o.resolution) + *window;
  auto reply = ctx.get("/hosts/" + urlEncode(o.name) + "/gpus/" + std::to_string(o.gpu) +
                       "/history" + query);
  return ctx.printReply(reply, [&](const json& history) {
    Table table({"TIME", "SAMPLES", "UTIL %", "MEMORY", "TEMP C", "POWER W"});
    for (const auto& p : history.value("points", json::array())) {
      table.addRow({text(p, "at"), std::to_string(p.value("samples", int64_t{0})),
                    pointNumber(p, "utilization_pct", 1), memoryText(p, "memory_max_mib"),
                    pointNumber(p, "temperature_max_c", 0), pointNumber(p, "power_w", 0)});
    }
    ctx.out() << o.name << " GPU " << o.gpu << ", " << text(history, "resolution") << " from "
              << text(history, "from") << " to " << text(history, "to") << "\n";
    if (!table.empty()) ctx.out() << table.render();
    if (history.value("truncated", false))
      ctx.out() << "(the first 10,000 points; narrow --from/--to or use --resolution hour)\n";
  });
}

}  // namespace

void addHostCommands(CLI::App& app, Context& ctx) {
  auto* host = addGroup(app, "host", "GPU hosts: the shared pool and dedicated hosts");
  auto o = std::make_shared<HostOpts>();

  auto* list = host->add_subcommand("list", "List hosts");
  onRun(list, ctx, o, [](Context& c, const HostOpts&) { return hostList(c); });

  auto* show = host->add_subcommand("show", "Show a host, its GPUs and which jobs hold them");
  show->add_option("NAME", o->name, "Host name")->required();
  onRun(show, ctx, o, hostShow);

  addHostJoinCommands(host, ctx);

  auto* ded = host->add_subcommand(
      "dedicate", "Reserve a host for one team; others no longer see it (platform-admin)");
  ded->add_option("HOST", o->name, "Host name")->required();
  ded->add_option("--team", o->team, "The team it is reserved for")->required();
  onRun(ded, ctx, o, [](Context& c, const HostOpts& x) { return dedicate(c, x, x.team); });

  auto* unded =
      host->add_subcommand("undedicate", "Return a host to the shared pool (platform-admin)");
  unded->add_option("HOST", o->name, "Host name")->required();
  onRun(unded, ctx, o, [](Context& c, const HostOpts& x) { return dedicate(c, x, ""); });

  auto* contour =
      host->add_subcommand("set-contour",
                           "Move a host to a contour; it then takes only that contour's work "
                           "(platform-admin)");
  contour->add_option("HOST", o->name, "Host name")->required();
  contour->add_option("CONTOUR", o->contour, "The contour: dev, test, prod, or as configured")
      ->required();
  onRun(contour, ctx, o, setContour);

  auto* gpu = host->add_subcommand(
      "gpu", "Dedicate one GPU to a team, or share it among fractional jobs (platform-admin)");
  gpu->add_option("HOST", o->name, "Host name")->required();
  gpu->add_option("INDEX", o->gpu, "GPU index, as in `allot host show`")
      ->required()
      ->check(CLI::NonNegativeNumber);
  auto* dedOpt = gpu->add_option("--dedicate", o->dedicate, "Reserve the GPU for this team");
  auto* undedOpt =
      gpu->add_flag("--undedicate", o->undedicate, "Return the GPU to its host's pool");
  dedOpt->excludes(undedOpt);
  auto* sharedOpt =
      gpu->add_flag("--shared", o->shared, "Fractional jobs may share it (allot run --gpus 0.5)");
  auto* exclOpt = gpu->add_flag("--exclusive", o->exclusive, "One job at a time (the default)");
  sharedOpt->excludes(exclOpt);
  onRun(gpu, ctx, o, gpuSettings);

  auto* history = host->add_subcommand(
      "history", "A GPU's utilisation, memory, temperature and power over time");
  history->add_option("HOST", o->name, "Host name")->required();
  history->add_option("INDEX", o->gpu, "GPU index, as in `allot host show`")
      ->required()
      ->check(CLI::NonNegativeNumber);
  history->add_option("--from", o->from,
                      "Start (ISO 8601 or relative: -2h; default 1h before --to)");
  history->add_option("--to", o->to, "End, exclusive (ISO 8601 or relative; default now)");
  history->add_option("--resolution", o->resolution, "raw, minute (default) or hour")
      ->check(CLI::IsMember({"raw", "minute", "hour"}));
  onRun(history, ctx, o, gpuHistory);

  addHostLifecycleCommands(host, ctx);
  addHostHandoverCommands(host, ctx);
  addHostUpgradeCommands(host, ctx);
}

}  // namespace allot::cli
