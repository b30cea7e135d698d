// allot session: interactive sessions (POST/GET /sessions...; docs/sessions.md): start one from a
// profile, list, show, stop and share them, and open one's Jupyter in a browser.

#include <chrono>
#include <cstdlib>
#include <thread>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/session_lookup.h"
#include "cli/table.h"
#include "common/time_format.h"

namespace allot::cli {
namespace {

struct SessionOpts {
  std::string session;  // id or name
  std::string profile;
  std::string name;
  std::string team;
  std::string project;
  std::string gpus;
  std::string gpuFraction;
  std::string cpus;
  std::string memory;
  std::string storage;
  bool all = false;
  bool ended = false;
  bool noBrowser = false;
  std::string wait = "60s";
  std::vector<std::string> with;
};

std::string gpusText(const json& s) {
  const int gpus = s.value("gpus", 0);
  const int milli = s.value("gpu_milli", 1000);
  if (gpus == 1 && milli < 1000) return std::to_string(milli / 10) + "% of 1";
  return std::to_string(gpus);
}

Result<json> createBody(const SessionOpts& o) {
  json body = json::object();
  for (auto [key, value] : {std::pair{"profile", &o.profile},
                            {"name", &o.name},
                            {"team", &o.team},
                            {"project", &o.project},
                            {"storage", &o.storage}}) {
    if (!value->empty()) body[key] = *value;
  }
  if (!o.gpus.empty() && !o.gpuFraction.empty())
    return Status::InvalidArgument("--gpus and --gpu-fraction: give one, not both");
  if (!o.gpus.empty()) {
    auto g = parseLimit(o.gpus, "--gpus");
    if (!g.ok()) return g.status();
    body["gpus"] = *g < 0 ? 0 : *g;
  }
  if (!o.gpuFraction.empty()) {
    auto g = parseGpuAmount(o.gpuFraction);
    if (!g.ok()) return g.status().withContext("--gpu-fraction");
    if (g->gpus != 1 || g->milli >= 1000)
      return Status::InvalidArgument("--gpu-fraction: a share of one GPU, like 0.25, not '" +
                                     o.gpuFraction + "'");
    body["gpus"] = 1;
    body["gpu_milli"] = g->milli;
  }
  if (!o.cpus.empty()) {
    auto m = parseCpuMillis(o.cpus);
    if (!m.ok()) return m.status().withContext("--cpus");
    body["cpu_millis"] = *m;
  }
  if (!o.memory.empty()) {
    auto m = parseMemoryMib(o.memory, "--memory");
    if (!m.ok()) return m.status();
    body["memory_mib"] = *m;
  }
  return body;
}

std::string sessionUrl(const std::string& server, const json& s) {
  std::string base = server;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + text(s, "url");
}

int create(Context& ctx, const SessionOpts& o) {
  auto body = createBody(o);
  if (!body.ok()) return ctx.usageError(body.status());
  if (auto team = ctx.teamOr(o.team); !team.empty()) (*body)["team"] = team;
  return ctx.printReply(ctx.post("/sessions", *body), [&](const json& s) {
    ctx.out() << "Session " << text(s, "id") << " (" << text(s, "name") << ", profile "
              << text(s, "profile") << ") is " << text(s, "state");
    if (!s.value("host", json()).is_null()) ctx.out() << " on " << text(s, "host");
    ctx.out() << ".\n";
    if (s.value("state", "") == "queued") ctx.out() << "  " << text(s, "reason") << "\n";
    if (!s.value("url", json()).is_null())
      ctx.out() << "Open it with: allot session open " << text(s, "name") << "\n";
  });
}

int list(Context& ctx, const SessionOpts& o) {
  std::string path = "/sessions";
  if (o.all || o.ended)
    path += std::string("?") + (o.all ? "all=true" : "") + (o.all && o.ended ? "&" : "") +
            (o.ended ? "ended=true" : "");
  return ctx.printReply(ctx.get(path), [&](const json& sessions) {
    std::vector<std::string> cols = {"ID",   "NAME", "PROFILE", "STATE",
                                     "HOST", "GPUS", "STORAGE", "CREATED"};
    if (o.all) cols.insert(cols.begin() + 2, "USER");
    Table table(cols);
    for (const auto& s : sessions) {
      std::vector<std::string> row = {
          text(s, "id"),        text(s, "name"),
          text(s, "profile"),   text(s, "state"),
          text(s, "host", "-"), gpusText(s),
          text(s, "storage"),   relativeTime(text(s, "created_at"), ctx.now())};
      if (o.all) row.insert(row.begin() + 2, text(s, "user"));
      table.addRow(row);
    }
    if (table.empty()) {
      ctx.out() << (o.ended ? "No sessions.\n" : "No live sessions.\n");
      return;
    }
    ctx.out() << table.render();
  });
}

int show(Context& ctx, const SessionOpts& o) {
  auto id = findSession(ctx, o.session);
  if (!id.ok()) return ctx.fail(id.status());
  auto s = ctx.get("/sessions/" + std::to_string(*id));
  if (!s.ok()) return ctx.fail(s.status());
  if (ctx.jsonOutput()) return ctx.printJson(*s);
  auto settings = ctx.settings();
  Details d;
  d.add("id", text(*s, "id"));
  d.add("name", text(*s, "name"));
  d.add("owner", text(*s, "user") + " (team " + text(*s, "team") + ")");
  d.add("profile", text(*s, "profile") + " (" + text(*s, "app") + ")");
  d.add("state", text(*s, "state"));
  if (!s->value("reason", json()).is_null()) d.add("reason", text(*s, "reason"));
  d.add("host", text(*s, "host", "-"));
  d.add("gpus", gpusText(*s));
  {
    // "local, 1.2 GiB used in /var/lib/allot-agent/homes/alice"
    std::string storage = text(*s, "storage");
    const json used = s->value("storage_used_bytes", json());
    if (used.is_number())
      storage += ", " + formatMib((used.get<int64_t>() + (1 << 20) - 1) >> 20) + " used";
    if (s->value("storage_path", json()).is_string()) storage += " in " + text(*s, "storage_path");
    d.add("storage", storage);
  }
  if (s->value("ssh", json()).is_object())
    d.add("ssh", "allot ssh " + text(*s, "name") + " (as " + text((*s)["ssh"], "user") + ")");
  if (!s->value("url", json()).is_null() && settings.ok())
    d.add("url", sessionUrl(settings->server, *s));
  if (!s->value("connections", json()).is_null())
    d.add("activity",
          text(*s, "connections") + " connections, " + text(*s, "busy_kernels") + " busy kernels");
  const json idle = s->value("idle", json::object());
  d.add("idle after", text(idle, "after") + " under " + text(idle, "threshold_percent") + "% GPU");
  d.add("max lifetime", text(*s, "max_lifetime", "unlimited"));
  std::string shared;
  for (const auto& u : s->value("shared_with", json::array()))
    shared += (shared.empty() ? "" : ", ") + u.get<std::string>();
  d.add("shared with", shared.empty() ? "-" : shared);
  d.add("created", relativeTime(text(*s, "created_at"), ctx.now()));
  ctx.out() << d.render();
  return 0;
}

int stop(Context& ctx, const SessionOpts& o) {
  auto id = findSession(ctx, o.session);
  if (!id.ok()) return ctx.fail(id.status());
  auto reply = ctx.post("/sessions/" + std::to_string(*id) + "/stop", json::object());
  return ctx.printReplyLine(reply, [](const json& s) {
    return "Session " + text(s, "id") + " (" + text(s, "name") + ") is " + text(s, "state") + ".";
  });
}

int share(Context& ctx, const SessionOpts& o) {
  auto id = findSession(ctx, o.session);
  if (!id.ok()) return ctx.fail(id.status());
  std::vector<std::string> users;
  std::string names;
  for (const auto& w : o.with) {
    for (auto& u : splitList(w)) {
      names += (names.empty() ? "" : ", ") + u;
      users.push_back(u);
    }
  }
  auto reply = ctx.put("/sessions/" + std::to_string(*id) + "/shared-with", json{{"users", users}});
  return ctx.printReplyLine(reply, [&](const json& s) {
    return "Session " + text(s, "id") + " is shared with " +
           (names.empty() ? std::string("nobody") : names) + ".";
  });
}

// Waits until the session runs and Jupyter answers, prints its URL and, where there is a
// desktop, opens it in the browser (where the console's login cookie authenticates it).
int open(Context& ctx, const SessionOpts& o) {
  auto wait = parseDurationMs(o.wait);
  if (!wait.ok()) return ctx.usageError(wait.status().withContext("--wait"));
  auto settings = ctx.settings();
  if (!settings.ok()) return ctx.fail(settings.status());
  auto id = findSession(ctx, o.session);
  if (!id.ok()) return ctx.fail(id.status());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(*wait);
  json s;
  std::string toldWhy;  // the wait reason last printed, so that each new one shows once
  for (;;) {
    auto got = ctx.get("/sessions/" + std::to_string(*id));
    if (!got.ok()) return ctx.fail(got.status());
    s = *got;
    const std::string state = s.value("state", "");
    const std::string why = text(s, "reason", "");
    if (state == "running") break;
    if (state != "queued" && state != "starting")
      return ctx.fail(Status::FailedPrecondition("session " + std::to_string(*id) + " is " + state +
                                                 (why.empty() ? "" : ": " + why)));
    // Queued: say why while waiting, as `allot run --wait` does, not only when time is up.
    if (state == "queued" && !why.empty() && why != toldWhy) {
      ctx.err() << "session " << *id << " is queued: " << why << "\n";
      toldWhy = why;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return ctx.fail(Status::Unavailable("session " + std::to_string(*id) + " is still " + state +
                                          " after " + o.wait +
                                          (state == "queued" && !why.empty() ? ": " + why : "")));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (s.value("url", json()).is_null())
    return ctx.fail(Status::FailedPrecondition("session " + std::to_string(*id) +
                                               " runs no Jupyter; connect with: allot ssh " +
                                               text(s, "name")));
  const std::string url = sessionUrl(settings->server, s);
  if (ctx.jsonOutput()) return ctx.printJson(json{{"id", *id}, {"url", url}});
  ctx.out() << url << "\n";
  const bool desktop =
      std::getenv("DISPLAY") != nullptr || std::getenv("WAYLAND_DISPLAY") != nullptr;
  if (!o.noBrowser && desktop) {
    // The URL holds no secret: the browser's console login is what lets it in.
    const std::string cmd = "xdg-open '" + url + "' >/dev/null 2>&1 &";
    if (std::system(cmd.c_str()) != 0) ctx.err() << "allot: could not start a browser\n";
  }
  return 0;
}

}  // namespace

void addSessionCommands(CLI::App& app, Context& ctx) {
  auto* session = addGroup(app, "session",
                           "Interactive sessions: Jupyter and SSH workspaces (docs/sessions.md)");
  auto o = std::make_shared<SessionOpts>();

  auto* create_ = session->add_subcommand("create", "Start a session from a profile");
  create_->add_option("--profile", o->profile, "The profile (default: jupyter)");
  create_->add_option("--name", o->name, "Its name, unique among your live sessions");
  create_->add_option("--team", o->team,
                      "The team it is for (default: your default team, or your only one)");
  create_->add_option("--project", o->project, "The project its GPU time is accounted to");
  create_->add_option("--gpus", o->gpus, "Whole GPUs (default: the profile's)");
  create_->add_option("--gpu-fraction", o->gpuFraction, "A share of one GPU: 0.25");
  create_->add_option("--cpus", o->cpus, "CPUs: cores (2, 0.5) or millicores (250m)");
  create_->add_option("--memory", o->memory, "Memory: 512Mi, 16Gi");
  create_->add_option("--storage", o->storage, "local, scratch or shared (default: the profile's)");
  create_->footer("Example: allot session create --profile torch --name exp1 --gpus 1");
  onRun(create_, ctx, o, create);

  auto* list_ = session->add_subcommand("list", "Your live sessions");
  list_->add_flag("--all", o->all, "Every session of your teams you may see, not only yours");
  list_->add_flag("--ended", o->ended, "Include ended sessions");
  onRun(list_, ctx, o, list);

  auto* show_ = session->add_subcommand("show", "One session");
  show_->add_option("SESSION", o->session, "Its id or name")->required();
  onRun(show_, ctx, o, show);

  auto* stop_ = session->add_subcommand("stop", "Stop a session (its scratch is deleted)");
  stop_->add_option("SESSION", o->session, "Its id or name")->required();
  onRun(stop_, ctx, o, stop);

  auto* share_ =
      session->add_subcommand("share", "Let users of its team open it (replaces the list)");
  share_->add_option("SESSION", o->session, "Its id or name")->required();
  share_->add_option("--with", o->with, "Users: bob,carol (none: share with nobody)");
  onRun(share_, ctx, o, share);

  auto* open_ = session->add_subcommand(
      "open", "Wait until its Jupyter answers, print its URL and open it in a browser");
  open_->add_option("SESSION", o->session, "Its id or name")->required();
  open_->add_flag("--no-browser", o->noBrowser, "Only print the URL");
  open_->add_option("--wait", o->wait, "How long to wait for it to start (default 60s)");
  onRun(open_, ctx, o, open);
}

}  // namespace allot::cli
