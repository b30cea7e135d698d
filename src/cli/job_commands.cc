// allot run, allot job: submitting work, watching it, stopping it.

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/job_file.h"
#include "cli/job_follow.h"
#include "cli/run_options.h"
#include "cli/table.h"
#include "common/time_format.h"

namespace allot::cli {
namespace {

constexpr const char* kJobStates[] = {"queued", "scheduled", "pulling", "running",  "succeeded",
                                      "failed", "cancelled", "lost",    "preempted"};

// --dependency as Slurm writes it: comma-separated TYPE:ID[:ID...] entries, where a bare ID
// after a comma keeps the type before it ("afterok:12,13"). Sent as [{"kind", "job"}].
Result<json> dependencyBody(const std::string& text) {
  json out = json::array();
  std::string kind;
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("--dependency '" + text + "': " + why +
                                   " (e.g. afterok:12 or afterany:12,13)");
  };
  for (const auto& entry : splitList(text)) {
    std::vector<std::string> parts;
    for (size_t at = 0;;) {
      const size_t colon = entry.find(':', at);
      parts.push_back(entry.substr(at, colon == std::string::npos ? colon : colon - at));
      if (colon == std::string::npos) break;
      at = colon + 1;
    }
    size_t first = 0;
    if (!parts[0].empty() && !std::isdigit(static_cast<unsigned char>(parts[0][0])) &&
        parts[0].rfind("j-", 0) != 0) {
      kind = parts[0];
      if (kind != "afterok" && kind != "afternotok" && kind != "afterany")
        return bad("unknown type '" + kind + "': afterok, afternotok or afterany");
      first = 1;
      if (parts.size() == 1) return bad(kind + " names no job");
    }
    if (kind.empty()) return bad("give the type first");
    for (size_t i = first; i < parts.size(); ++i) {
      auto id = parseJobId(parts[i]);
      if (!id.ok()) return bad("'" + parts[i] + "' is not a job id");
      out.push_back({{"kind", kind}, {"job", *id}});
    }
  }
  if (out.empty()) return bad("names no job");
  return out;
}

struct JobOpts {
  std::string id;
  std::string state;
  std::string team;
  std::string user;
  bool mine = false;
  std::string since;
  std::string until;
  int limit = 0;
  bool follow = false;
  int rank = 0;
  int tail = -1;  // logs: only the last N lines (-1: all)
  bool watch = false;
  std::string interval = "2s";
};

// A comma-separated list of job states ("queued,running"), each one allotd knows.
CLI::Validator jobStatesValidator() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        size_t start = 0;
        while (start <= value.size()) {
          const size_t comma = value.find(',', start);
          const std::string one = value.substr(start, comma - start);
          if (std::find(std::begin(kJobStates), std::end(kJobStates), one) == std::end(kJobStates))
            return "unknown job state '" + one +
                   "' (states: queued, scheduled, running, "
                   "succeeded, failed, cancelled, lost, preempted)";
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
        return "";
      },
      "STATE[,STATE...]");
}

std::string listText(const json& job, const char* key) {
  auto it = job.find(key);
  if (it == job.end() || !it->is_array() || it->empty()) return "-";
  std::string out;
  for (const auto& v : *it) {
    if (!out.empty()) out += ",";
    out += v.is_string() ? v.get<std::string>() : v.dump();
  }
  return out;
}

// "0.5": a fraction of one shared GPU.
std::string fractionText(int64_t milli) {
  char buf[16];
  snprintf(buf, sizeof buf, "%g", milli / 1000.0);
  return buf;
}

// "8x H100", "2x A100,H100", "0.5x A100", "host" (a whole host), "0".
std::string gpusText(const json& job) {
  if (isTrue(job, "whole_host")) return "host";
  std::string n = text(job, "gpus", "0");
  auto milli = job.find("gpu_milli");
  if (milli != job.end() && milli->is_number_integer() && milli->get<int64_t>() < 1000)
    n = fractionText(milli->get<int64_t>());
  std::string models = listText(job, "gpu_models");
  return models == "-" ? n : n + "x " + models;
}

std::string envText(const json& job) {
  auto it = job.find("env");
  if (it == job.end() || !it->is_object() || it->empty()) return "-";
  std::vector<std::string> entries;
  for (const auto& [k, v] : it->items()) {
    entries.push_back(k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
  }
  return shellJoin(entries);
}

std::string commandText(const json& job) {
  auto it = job.find("command");
  if (it == job.end() || !it->is_array()) return "-";
  std::vector<std::string> argv;
  for (const auto& a : *it) argv.push_back(a.is_string() ? a.get<std::string>() : a.dump());
  return shellJoin(argv);
}

// A resource limit, where 0 or absent means there is none: "unlimited", as quotas say it
// ("none" reads as "nothing" elsewhere).
template <typename Fn>
std::string limitText(const json& job, const char* key, Fn format) {
  auto it = job.find(key);
  if (it == job.end() || !it->is_number_integer() || it->get<int64_t>() <= 0) return "unlimited";
  return format(it->get<int64_t>());
}

std::string timeText(const json& job, const char* key, TimeMs now) {
  std::string iso = text(job, key, "");
  return iso.empty() ? "-" : iso + " (" + relativeTime(iso, now) + ")";
}

// "2", "0.5 (a fraction of one shared GPU)", "every GPU of one host".
std::string gpuAmountText(const json& job) {
  if (isTrue(job, "whole_host")) return "every GPU of one host";
  auto milli = job.find("gpu_milli");
  if (milli != job.end() && milli->is_number_integer() && milli->get<int64_t>() < 1000)
    return fractionText(milli->get<int64_t>()) + " (a fraction of one shared GPU)";
  return text(job, "gpus", "0");
}

// ", at most 10 running at once" for an array's %10; "" for an array without a limit.
std::string arrayLimitText(int limit) {
  return limit > 0 ? ", at most " + std::to_string(limit) + " running at once" : "";
}

int submit(Context& ctx, const RunOpts& o) {
  if (o.command.empty())
    return ctx.usageError(Status::InvalidArgument(
        "no command: give it after --, or as command: in the job spec file (-f)"));
  if (o.wait && !o.array.empty())
    return ctx.usageError(Status::InvalidArgument(
        "--wait follows one job, and --array makes many: watch them with allot job list --watch"));
  auto env = parseEnvEntries(o.env);
  if (!env.ok()) return ctx.usageError(env.status());
  json body = {{"command", o.command}};
  if (!o.array.empty()) body["array"] = o.array;
  if (!o.image.empty()) body["image"] = o.image;
  if (!o.workdir.empty()) {
    // Relative to where the command is typed, as sbatch --chdir: for code on shared storage.
    std::error_code ec;
    auto dir = std::filesystem::absolute(o.workdir, ec).lexically_normal().string();
    if (ec) return ctx.usageError(Status::InvalidArgument("--workdir: " + ec.message()));
    if (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    body["workdir"] = dir;
  }
  if (o.wholeHost && !o.gpus.empty())
    return ctx.usageError(
        Status::InvalidArgument("--whole-host takes every GPU of one host; leave out --gpus"));
  if (!o.wholeHost) {
    auto amount = parseGpuAmount(o.gpus.empty() ? "0" : o.gpus);
    if (!amount.ok()) return ctx.usageError(amount.status());
    body["gpus"] = amount->gpus;
    if (amount->milli < 1000) body["gpu_milli"] = amount->milli;
  }
  if (!o.gpuMemory.empty()) {
    auto mib = parseMemoryMib(o.gpuMemory, "--gpu-memory");
    if (!mib.ok()) return ctx.usageError(mib.status());
    body["gpu_memory_mib"] = *mib;
  }
  if (!o.maxRuntime.empty()) {
    auto ms = parseDurationMs(o.maxRuntime);
    if (!ms.ok()) return ctx.usageError(ms.status().withContext("--max-runtime"));
    if (*ms <= 0)
      return ctx.usageError(
          Status::InvalidArgument("--max-runtime '" + o.maxRuntime + "': must be positive"));
    body["max_runtime"] = o.maxRuntime;
  }
  if (!o.cpus.empty()) {
    auto millis = parseCpuMillis(o.cpus);
    if (!millis.ok()) return ctx.usageError(millis.status());
    body["cpu_millis"] = *millis;
  }
  if (!o.memory.empty()) {
    auto mib = parseMemoryMib(o.memory);
    if (!mib.ok()) return ctx.usageError(mib.status());
    body["memory_mib"] = *mib;
  }
  if (!o.name.empty()) body["name"] = o.name;
  if (auto team = ctx.teamOr(o.team); !team.empty()) body["team"] = team;
  if (auto models = splitList(o.gpuModel); !models.empty()) body["gpu_models"] = models;
  if (o.priority != 0) body["priority"] = o.priority;
  if (o.preemptible) body["preemptible"] = true;
  if (o.wholeHost) body["whole_host"] = true;
  if (o.hosts != 1) body["hosts"] = o.hosts;
  if (!o.minDriver.empty()) body["min_driver"] = o.minDriver;
  if (!o.minCuda.empty()) body["min_cuda"] = o.minCuda;
  if (!o.contour.empty()) body["contour"] = o.contour;
  if (!o.project.empty()) body["project"] = o.project;
  if (!env->empty()) body["env"] = *env;
  if (o.queueAnyway) body["queue_anyway"] = true;
  if (!o.dependency.empty()) {
    auto deps = dependencyBody(o.dependency);
    if (!deps.ok()) return ctx.usageError(deps.status());
    body["dependencies"] = *deps;
  }

  auto api = ctx.api();
  if (!api.ok()) return ctx.fail(api.status());
  auto job = (*api)->post("/jobs", body);
  if (!job.ok()) return ctx.fail(job.status());
  std::string id = jobIdText(*job);
  auto idNum = parseJobId(id);
  if (!o.wait) {
    if (ctx.jsonOutput()) return ctx.printJson(*job);
    ctx.out() << id << "\n";
    if (auto tasks = job->find("array_tasks"); tasks != job->end() && tasks->is_array()) {
      const auto& a = job->value("array", json::object());
      const int limit = a.is_object() ? a.value("limit", 0) : 0;
      ctx.err() << "array " << id << ": " << tasks->size() << " tasks, " << id << " to j-"
                << tasks->back().dump() << arrayLimitText(limit) << "\n";
    }
    if (std::string reason = text(*job, "reason", ""); !reason.empty()) {
      ctx.err() << id << " " << text(*job, "state") << ": " << reason << "\n";
    }
    return 0;
  }
  if (!idNum.ok()) return ctx.fail(Status::Internal("server returned a job without an id"));

  ctx.err() << "Submitted " << id
            << "; streaming its output (Ctrl-C stops watching, not the job)\n";
  // While it waits in the queue, why, as `job explain` says it: once, and again when it changes.
  std::string lastReason;
  auto sayWhy = [&](const json& j) {
    if (text(j, "state", "") != "queued") return;
    const std::string reason = text(j, "reason", "");
    if (reason.empty() || reason == lastReason) return;
    lastReason = reason;
    ctx.err() << id << " queued: " << reason << "\n";
  };
  sayWhy(*job);
  auto onQuiet = [&](const std::string& state) {
    if (state != "queued" && !state.empty()) return;
    if (auto now = (*api)->get("/jobs/" + std::to_string(*idNum)); now.ok()) sayWhy(*now);
  };
  // With -o json, stdout carries only the final job, so the job's output goes to stderr.
  std::ostream& sink = ctx.jsonOutput() ? ctx.err() : ctx.out();
  auto state = streamLogs(**api, *idNum, sink, /*follow=*/true, 10, 0, 0, onQuiet);
  if (!state.ok()) return ctx.fail(state.status().withContext("while following " + id));
  auto final = (*api)->get("/jobs/" + std::to_string(*idNum));
  if (!final.ok()) return ctx.fail(final.status());
  int code = exitCodeForJob(*final);
  if (ctx.jsonOutput()) ctx.printJson(*final);
  if (code != 0) ctx.err() << endingSummary(*final) << "\n";
  return code;
}

int jobList(Context& ctx, const JobOpts& o) {
  std::string query;
  auto param = [&](const char* key, const std::string& value) {
    query += (query.empty() ? "?" : "&") + std::string(key) + "=" + urlEncode(value);
  };
  if (!o.state.empty()) param("state", o.state);
  if (!o.team.empty()) param("team", o.team);
  if (o.mine && !o.user.empty())
    return ctx.usageError(Status::InvalidArgument("--mine and --user: give one of them"));
  if (o.mine) {
    auto who = ctx.get("/whoami");
    if (!who.ok()) return ctx.fail(who.status());
    param("user", text(*who, "name", ""));
  }
  if (!o.user.empty()) param("user", o.user);
  if (o.limit > 0) param("limit", std::to_string(o.limit));
  // Relative times ("-2h") are resolved here, so the server sees the moment the user meant.
  for (auto [key, value] : {std::pair{"since", &o.since}, {"until", &o.until}}) {
    if (value->empty()) continue;
    auto t = parseTime(*value, ctx.now());
    if (!t.ok()) return ctx.usageError(t.status().withContext(std::string("--") + key));
    param(key, formatIso8601(*t));
  }
  auto render = [&](const json& jobs) {
    Table table({"ID", "NAME", "TEAM", "USER", "PROJECT", "STATE", "GPUS", "HOST", "SUBMITTED",
                 "DURATION", "REASON"});
    for (const auto& j : jobs) {
      table.addRow({jobIdText(j), text(j, "name"), text(j, "team"), text(j, "user"),
                    text(j, "project"), text(j, "state"), gpusText(j), text(j, "host"),
                    relativeTime(text(j, "submitted_at", ""), ctx.now()), jobDuration(j, ctx.now()),
                    text(j, "reason", "")});
    }
    return table.render();
  };
  if (!o.watch) {
    return ctx.printReply(ctx.get("/jobs" + query),
                          [&](const json& jobs) { ctx.out() << render(jobs); });
  }
  auto every = parseDurationMs(o.interval);
  if (!every.ok() || *every < 200)
    return ctx.usageError(Status::InvalidArgument("--interval '" + o.interval +
                                                  "': a duration of at least 200ms, e.g. 2s"));
  // As `kubectl get -w`: a new listing only when something changed, each under the time it was
  // seen; the durations' ticking alone is no change. Runs until interrupted.
  std::string last;
  for (;;) {
    auto jobs = ctx.get("/jobs" + query);
    if (!jobs.ok()) return ctx.fail(jobs.status());
    json stable = *jobs;
    for (auto& j : stable) j.erase("position");
    const std::string now = ctx.jsonOutput() ? jobs->dump() : render(*jobs);
    if (const std::string key = stable.dump(); key != last) {
      last = key;
      if (ctx.jsonOutput()) {
        ctx.out() << now << "\n";
      } else {
        ctx.out() << "--- " << formatIso8601(ctx.now()) << "\n" << now;
      }
      ctx.out().flush();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(*every));
  }
}

int jobShow(Context& ctx, const JobOpts& o) {
  auto id = parseJobId(o.id);
  if (!id.ok()) return ctx.usageError(id.status());
  auto job = ctx.get("/jobs/" + std::to_string(*id));
  if (!job.ok()) return ctx.fail(job.status());
  if (ctx.jsonOutput()) return ctx.printJson(*job);
  const json& j = *job;
  TimeMs now = ctx.now();
  Details d;
  d.add("id", jobIdText(j));
  d.add("name", text(j, "name"));
  d.add("state", text(j, "state"));
  d.add("reason", text(j, "reason"));
  if (j.contains("position")) d.add("queue position", text(j, "position"));
  if (j.contains("expected_start")) {
    d.add("expected start",
          j["expected_start"].is_string() ? timeText(j, "expected_start", now) : "unknown");
  }
  d.add("cancel requested", text(j, "cancel_requested", "no"));
  d.add("team", text(j, "team"));
  d.add("project", text(j, "project"));
  d.add("user", text(j, "user"));
  d.add("command", commandText(j));
  if (std::string w = text(j, "workdir", ""); !w.empty()) d.add("workdir", w);
  if (std::string image = text(j, "image", ""); !image.empty()) {
    d.add("image", image);
    // What it resolved to on the host: a rerun pins it with --image REPOSITORY@DIGEST.
    if (std::string digest = text(j, "image_digest", ""); !digest.empty())
      d.add("image digest", digest);
    if (std::string cuda = text(j, "image_min_cuda", ""); !cuda.empty())
      d.add("image needs", "CUDA " + cuda + " (its NVIDIA_REQUIRE_CUDA)");
  }
  if (auto pull = j.find("pull"); pull != j.end() && pull->is_object()) {
    const int64_t bytes = pull->value("bytes", int64_t{0}),
                  total = pull->value("total", int64_t{0});
    d.add("pulled", total > 0 ? formatBytes(bytes) + " of " + formatBytes(total)
                              : formatBytes(bytes) + " so far");
  }
  if (auto a = j.find("array"); a != j.end() && a->is_object()) {
    const int limit = a->value("limit", 0);
    d.add("array",
          "task " + text(*a, "index") + " of array j-" + text(*a, "id") + arrayLimitText(limit));
  }
  d.add("env", envText(j));
  d.add("gpus", gpuAmountText(j));
  if (std::string c = text(j, "contour", ""); !c.empty()) d.add("contour", c);
  d.add("gpu model", listText(j, "gpu_models") == "-" ? "any" : listText(j, "gpu_models"));
  // Scheduling fields, when they say more than the defaults.
  if (auto mib = j.find("gpu_memory_mib");
      mib != j.end() && mib->is_number_integer() && mib->get<int64_t>() > 0)
    d.add("gpu memory", formatMib(mib->get<int64_t>()));
  if (std::string p = text(j, "priority", "0"); p != "0") d.add("priority", p);
  if (isTrue(j, "preemptible")) d.add("preemptible", "yes");
  if (std::string m = text(j, "max_runtime", ""); !m.empty()) d.add("max runtime", m);
  if (std::string v = text(j, "min_driver", ""); !v.empty()) d.add("min driver", v);
  if (std::string v = text(j, "min_cuda", ""); !v.empty()) d.add("min cuda", v);
  if (std::string p = text(j, "preemptions", "0"); p != "0") d.add("preemptions", p);
  if (isTrue(j, "evicting")) d.add("evicting", "yes, since " + timeText(j, "evicting_since", now));
  if (std::string why = text(j, "evicted_for", ""); !why.empty()) d.add("evicted for", why);
  if (auto idle = j.find("idle"); idle != j.end() && idle->is_object()) {
    std::string line = "GPUs idle since " + timeText(*idle, "since", now);
    line += text(*idle, "reclaim_at", "").empty()
                ? "; notified, not to be reclaimed"
                : "; to be reclaimed at " + timeText(*idle, "reclaim_at", now) + " unless busy";
    d.add("idle", line);
  }
  d.add("cpu limit", limitText(j, "cpu_millis", [](int64_t m) {
          char buf[32];
          snprintf(buf, sizeof buf, "%g cores", m / 1000.0);
          return std::string(buf);
        }));
  d.add("memory limit", limitText(j, "memory_mib", formatMib));
  d.add("host", text(j, "host"));
  d.add("gpu indices", listText(j, "gpu_indices"));
  d.add("gpu uuids", listText(j, "gpu_uuids"));
  if (auto hosts = j.find("hosts"); hosts != j.end() && hosts->is_number() && *hosts != 1)
    d.add("hosts", hosts->dump());
  if (auto ranks = j.find("ranks"); ranks != j.end() && ranks->is_array()) {
    for (const auto& k : *ranks) {
      std::string line =
          text(k, "host") + " gpus " + listText(k, "gpu_indices") + ", " + text(k, "state");
      if (std::string code = text(k, "exit_code", ""); !code.empty()) line += " code " + code;
      if (std::string sig = text(k, "signal", ""); !sig.empty()) line += " signal " + sig;
      d.add("rank " + text(k, "rank"), line);
    }
    if (std::string port = text(j, "master_port", ""); !port.empty())
      d.add("rendezvous", text(j, "host") + " port " + port + " (MASTER_PORT)");
  }
  d.add("exit code", text(j, "exit_code"));
  d.add("signal", text(j, "signal"));
  d.add("submitted", timeText(j, "submitted_at", now));
  if (!text(j, "scheduled_at", "").empty()) d.add("placed", timeText(j, "scheduled_at", now));
  d.add("started", timeText(j, "started_at", now));
  d.add("finished", timeText(j, "finished_at", now));
  d.add("duration", jobDuration(j, now));
  // Fields this CLI does not know yet still show.
  static const std::set<std::string> kShown = {
      "id",           "name",           "state",       "reason",         "position",
      "team",         "project",        "user",        "command",        "env",
      "gpus",         "gpu_models",     "gpu_milli",   "gpu_memory_mib", "cpu_millis",
      "memory_mib",   "priority",       "preemptible", "whole_host",     "max_runtime",
      "min_driver",   "min_cuda",       "preemptions", "evicting",       "evicting_since",
      "evicted_for",  "host",           "gpu_indices", "gpu_uuids",      "exit_code",
      "signal",       "submitted_at",   "started_at",  "finished_at",    "cancel_requested",
      "hosts",        "ranks",          "contour",     "workdir",        "array",
      "master_port",  "expected_start", "image",       "image_digest",   "pull",
      "scheduled_at", "image_min_cuda"};
  d.addOthers(j, kShown);
  ctx.out() << d.render();
  return 0;
}

// `allot job explain`: the scheduler's word on a job, from the last pass.
int jobExplain(Context& ctx, const JobOpts& o) {
  auto id = parseJobId(o.id);
  if (!id.ok()) return ctx.usageError(id.status());
  auto why = ctx.get("/jobs/" + std::to_string(*id) + "/explain");
  if (!why.ok()) return ctx.fail(why.status());
  if (ctx.jsonOutput()) return ctx.printJson(*why);
  const json& e = *why;
  Details d;
  d.add("job", "j-" + e.value("job", json(0)).dump());
  d.add("state", text(e, "state"));
  auto number = [](const json& v) {
    if (!v.is_number()) return v.dump();
    char buf[32];
    snprintf(buf, sizeof buf, "%g", v.get<double>());
    return std::string(buf);
  };
  if (auto c = e.find("image_min_cuda"); c != e.end() && c->is_object())
    d.add("image needs", text(*c, "reason"));
  if (auto w = e.find("wait"); w != e.end() && w->is_object()) {
    d.add("waits because", text(*w, "reason"));
    d.add("kind", text(*w, "kind"));
    if (w->contains("position")) d.add("queue position", text(*w, "position"));
    for (const auto& [key, label] : {std::pair{"free_gpus_total", "free GPUs in total"},
                                     {"most_free_on_one_host", "most free on one host"},
                                     {"largest_host_gpus", "largest host"},
                                     {"gang_hosts_ready", "gang hosts ready"},
                                     {"gang_hosts_wanted", "gang hosts wanted"},
                                     {"reserved_host", "reserved host"},
                                     {"expected_start", "expected start"}}) {
      if (auto v = w->find(key); v != w->end())
        d.add(label, v->is_string() ? v->get<std::string>() : number(*v));
    }
    if (auto v = w->find("waiting_for_jobs"); v != w->end()) d.add("waiting for jobs", v->dump());
  }
  if (auto p = e.find("placement"); p != e.end() && p->is_object()) {
    d.add("placed by", text(*p, "by"));
    d.add("policy", text(*p, "policy"));
    d.add("within guarantee", number(p->value("within_guarantee_gpus", json(0.0))) + " GPUs");
    d.add("borrowed", number(p->value("borrowed_gpus", json(0.0))) + " GPUs");
    for (const auto& sl : p->value("slices", json::array()))
      d.add("on", text(sl, "host") + " GPUs " + sl.value("gpus", json::array()).dump());
    if (auto b = p->find("backfilled_before_job"); b != p->end())
      d.add("backfilled before", "j-" + b->dump());
    if (p->value("image_cached", false))
      d.add("image", "cached on its host already (preferred among equally good hosts)");
  }
  if (auto q = e.find("team_quota"); q != e.end() && q->is_object()) {
    const double effective = q->value("guaranteed_gpus", json(0.0)).get<double>();
    const double configured = q->value("configured_guarantee_gpus", json(effective)).get<double>();
    const std::string scaled = effective + 0.0005 < configured
                                   ? " of the " + number(json(configured)) +
                                         " set (scaled down: the teams' guarantees exceed the pool)"
                                   : "";
    d.add("team " + text(*q, "team"),
          "guaranteed " + number(q->value("guaranteed_gpus", json(0.0))) + scaled + ", within " +
              number(q->value("within_guarantee_gpus", json(0.0))) + ", borrowed " +
              number(q->value("borrowed_gpus", json(0.0))) + ", lendable " +
              number(q->value("lendable_gpus", json(0.0))) + " GPUs");
  }
  if (std::string r = text(e, "reason", ""); !r.empty() && !e.contains("wait")) d.add("reason", r);
  ctx.out() << d.render();
  return 0;
}

int jobLogs(Context& ctx, const JobOpts& o) {
  auto id = parseJobId(o.id);
  if (!id.ok()) return ctx.usageError(id.status());
  auto api = ctx.api();
  if (!api.ok()) return ctx.fail(api.status());
  int64_t from = 0;
  // Both given, as kubectl logs: the last N lines of what arrived since T.
  if (!o.since.empty()) {
    auto t = parseTime(o.since, ctx.now());
    if (!t.ok()) return ctx.usageError(t.status().withContext("--since"));
    auto start = sinceStart(**api, *id, o.rank, formatIso8601(*t));
    if (!start.ok()) return ctx.fail(start.status());
    from = *start;
  }
  if (o.tail >= 0) {
    auto start = tailStart(**api, *id, o.rank, o.tail);
    if (!start.ok()) return ctx.fail(start.status());
    from = std::max(from, *start);
  }
  auto state = streamLogs(**api, *id, ctx.out(), o.follow, 10, o.rank, from);
  if (!state.ok()) return ctx.fail(state.status());
  return 0;
}

// hold, release, requeue: POST /jobs/{id}/{verb}, then the job's state and why.
int jobControl(Context& ctx, const JobOpts& o, const char* verb, const char* done) {
  auto id = parseJobId(o.id);
  if (!id.ok()) return ctx.usageError(id.status());
  auto reply = ctx.post("/jobs/" + std::to_string(*id) + "/" + verb, json::object());
  return ctx.printReplyLine(reply, [done](const json& job) {
    std::string line = std::string(done) + " " + jobIdText(job) + " (" + text(job, "state") + ")";
    if (std::string reason = text(job, "reason", ""); !reason.empty()) line += ": " + reason;
    return line;
  });
}

int jobCancel(Context& ctx, const JobOpts& o) {
  auto id = parseJobId(o.id);
  if (!id.ok()) return ctx.usageError(id.status());
  auto reply = ctx.post("/jobs/" + std::to_string(*id) + "/cancel", json::object());
  return ctx.printReplyLine(reply, [](const json& job) {
    std::string state = text(job, "state");
    if (state == "cancelled") return "Cancelled " + jobIdText(job);
    return "Cancel requested for " + jobIdText(job) + " (" + state +
           "); it becomes cancelled once its agent has stopped it";
  });
}

}  // namespace

void addRunCommand(CLI::App& app, Context& ctx) {
  auto r = std::make_shared<RunOpts>();
  auto* run = app.add_subcommand("run", "Submit a job: allot run [flags] -- CMD [ARGS...]");
  run->add_option("--gpus", r->gpus,
                  "GPUs the job needs (default 0), or a fraction of one shared GPU: 0.5");
  run->add_option("--gpu-model", r->gpuModel,
                  "Only GPUs of these models, e.g. A100 or A100,H100 (default: any)");
  run->add_option("--gpu-memory", r->gpuMemory,
                  "GPU memory it needs on each GPU (with a fraction: on the shared GPU), e.g. "
                  "10Gi");
  run->add_option("--priority", r->priority, "-1000..1000; higher goes first (default 0)");
  run->add_flag("--preemptible", r->preemptible,
                "It may be stopped and requeued to make room for other work");
  run->add_flag("--whole-host", r->wholeHost, "Every GPU, CPU and byte of memory of one host");
  run->add_option("--hosts", r->hosts,
                  "Run one process on each of N hosts (1..64), --gpus GPUs each, started "
                  "together with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set")
      ->check(CLI::Range(1, 64));
  run->add_option("--max-runtime", r->maxRuntime,
                  "Cancel it if it runs longer than this, e.g. 2h; also helps it start sooner");
  run->add_option("--min-driver", r->minDriver, "Only hosts with at least this driver: 535.104");
  run->add_option("--min-cuda", r->minCuda, "Only hosts with at least this CUDA version: 12.2");
  run->add_option("--contour", r->contour,
                  "Run in this contour (dev, test, prod, or as configured; default: the "
                  "server's default, dev); it runs only on hosts of that contour");
  run->add_option("--project", r->project, "Project to file the job under");
  run->add_option("--name", r->name, "A name for the job");
  run->add_option("--team", r->team,
                  "Submit for this team (default: your default team, or your only one)");
  run->add_option("--cpus", r->cpus, "CPU limit: cores (2, 0.5) or millicores (250m)");
  run->add_option("--memory", r->memory, "Memory limit: MiB (512) or 512Mi, 16Gi, 1Ti");
  run->add_option("--env", r->env, "Environment entry KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
  run->add_flag("--queue-anyway", r->queueAnyway,
                "Queue it even if no host joined so far could ever run it (for hosts about to "
                "join); without it such a job is refused with the reason");
  run->add_option("-d,--dependency", r->dependency,
                  "Run only after other jobs: afterok:ID[,ID...] (they succeeded), afternotok "
                  "(they failed), afterany (they ended); one that can no longer hold cancels it");
  run->add_flag("--wait", r->wait,
                "Stream the job's output and exit with its exit status when it ends");
  run->add_option("--array", r->array,
                  "A job array: one job per index, each with $ALLOT_ARRAY_INDEX, e.g. 0-99, "
                  "1,3,5-7 or 0-15:4; %N runs at most N at once (0-99%10)");
  run->add_option("--image", r->image,
                  "Run the command in this OCI image, e.g. registry:5000/ml/pytorch:2.3 or "
                  "...@sha256:DIGEST; the registry must be one your team may use "
                  "(docs/environments.md); \"host\": on the host, whatever the team's default "
                  "image");
  run->add_option("--workdir", r->workdir,
                  "Start the command in this directory on the hosts (relative: to this one), "
                  "e.g. code on shared storage (default: the job's own directory)");
  run->add_option("-f,--file", r->file,
                  "Read the job from a YAML spec with the same fields as these flags (gpus: 2, "
                  "command: [python, train.py], ...); flags given here win; - reads stdin");
  run->add_option("COMMAND", r->command,
                  "The command and its arguments, after -- (or command: in the -f file)");
  run->footer(
      "Examples:\n  allot run --gpus 2 --env SEED=1 --wait -- python train.py --lr 3e-4\n"
      "  allot run --array 0-99%10 -- sh -c 'python sweep.py --trial $ALLOT_ARRAY_INDEX'\n"
      "  allot run -f job.yaml --gpus 4");
  onRun(run, ctx, r, [run](Context& c, const RunOpts& given) {
    if (given.file.empty()) return submit(c, given);
    RunOpts merged = given;
    auto onCommandLine = [run](const std::string& flag) {
      return flag == "command" ? run->count("COMMAND") > 0 : run->count("--" + flag) > 0;
    };
    Status st;
    if (given.file == "-") {
      st = applyJobFile(c.in(), "stdin", &merged, onCommandLine);
    } else {
      std::ifstream in(given.file);
      if (!in) return c.usageError(Status::InvalidArgument("-f " + given.file + ": cannot read"));
      st = applyJobFile(in, given.file, &merged, onCommandLine);
    }
    if (!st.ok()) return c.usageError(st);
    return submit(c, merged);
  });
}

void addJobCommands(CLI::App& app, Context& ctx) {
  auto* job = addGroup(app, "job", "Jobs: list, inspect, explain, follow, cancel");
  auto o = std::make_shared<JobOpts>();

  auto* list = job->add_subcommand("list", "List jobs, newest first");
  list->add_option("--state", o->state, "Only jobs in these states: running, or queued,running")
      ->check(jobStatesValidator());
  list->add_option("--team", o->team, "Only this team's jobs (platform-admin)");
  list->add_option("--user", o->user, "Only this user's jobs");
  list->add_flag("--mine", o->mine, "Only my jobs");
  list->add_option("--since", o->since,
                   "Only jobs submitted at or after TIME (ISO 8601, or relative: -2h, -30m)");
  list->add_option("--until", o->until, "Only jobs submitted before TIME (ISO 8601 or relative)");
  list->add_option("--limit", o->limit, "At most this many (server default 1000)")
      ->check(CLI::PositiveNumber);
  list->add_flag("-w,--watch", o->watch,
                 "Keep watching: print the list again each time it changes (Ctrl-C stops)");
  list->add_option("--interval", o->interval, "With --watch: how often to look (default 2s)");
  onRun(list, ctx, o, jobList);

  // show, explain, logs, cancel: one job, named by its id.
  auto addForJob = [&](const char* name, const char* help, auto fn) {
    auto* cmd = job->add_subcommand(name, help);
    cmd->add_option("ID", o->id, "Job id: 42 or j-42")->required();
    onRun(cmd, ctx, o, fn);
    return cmd;
  };
  addForJob("show", "Show every field of a job", jobShow);
  addForJob("explain", "Why a job waits (reason, position, numbers) or how it was placed",
            jobExplain);
  auto* logs = addForJob("logs", "Print a job's output", jobLogs);
  logs->add_flag("-f,--follow", o->follow, "Keep printing new output until the job ends");
  logs->add_option("--rank", o->rank, "Which process of a multi-host job (default 0)")
      ->check(CLI::NonNegativeNumber);
  logs->add_option("-n,--tail", o->tail,
                   "Only the last N lines (with --follow: then what comes), as tail -n")
      ->check(CLI::NonNegativeNumber);
  logs->add_option("--since", o->since,
                   "Only output received at or after TIME (ISO 8601, or relative: -10m), to "
                   "within a second");
  addForJob("cancel", "Stop a job", jobCancel);
  addForJob("hold", "Keep a queued job from being scheduled until released",
            [](Context& c, const JobOpts& x) { return jobControl(c, x, "hold", "Held"); });
  addForJob("release", "Let a held job be scheduled again",
            [](Context& c, const JobOpts& x) { return jobControl(c, x, "release", "Released"); });
  addForJob("requeue", "Stop a running job and put it back in the queue (same id)",
            [](Context& c, const JobOpts& x) { return jobControl(c, x, "requeue", "Requeued"); });
}

}  // namespace allot::cli
