// The REST API's routes: read and check the input, ask the Cluster, commit, reply.
// The shapes are documented in docs/api.md and published in openapi.json.

#include <charconv>

#include "api/host_view.h"
#include "api/job_reply.h"
#include "api/job_text.h"
#include "api/json_input.h"
#include "api/route_helpers.h"
#include "api/server.h"
#include "common/time_format.h"
#include "control/authz.h"
#include "model/json.h"
#include "model/resource_limits.h"

namespace allot::api {

namespace asio = boost::asio;
using control::Principal;

namespace {

Result<int64_t> parseJobId(const std::string& s) {
  std::string_view v = s;
  if (v.rfind("j-", 0) == 0) v.remove_prefix(2);
  return parsePathId(v, s, "a job");
}

Result<int64_t> queryInt(const ApiRequest& r, const char* key, int64_t fallback, int64_t min,
                         int64_t max) {
  auto it = r.query.find(key);
  if (it == r.query.end()) return fallback;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  if (ec != std::errc() || p != it->second.data() + it->second.size() || v < min || v > max)
    return Status::InvalidArgument(std::string(key) + ": must be an integer between " +
                                       std::to_string(min) + " and " + std::to_string(max),
                                   key);
  return v;
}

// A join token as admins see it: never its secret (only its hash is kept).
nlohmann::json joinTokenJson(const model::JoinToken& t, TimeMs now) {
  const char* state = t.revokedAt          ? "revoked"
                      : t.usesLeft() == 0  ? "used"
                      : t.expiresAt <= now ? "expired"
                                           : "active";
  return {{"id", t.id},
          {"created_by", t.createdBy},
          {"created_at", formatIso8601(t.createdAt)},
          {"expires_at", formatIso8601(t.expiresAt)},
          {"uses", t.uses},
          {"used", t.used},
          {"uses_left", t.expiresAt <= now ? 0 : t.usesLeft()},
          {"revoked_at", t.revokedAt ? nlohmann::json(formatIso8601(t.revokedAt)) : nullptr},
          {"state", state}};
}

// A listing shows each job's command and environment up to this many bytes: a list of a
// thousand jobs of 512 KiB each would otherwise be half a gigabyte built on the I/O thread.
constexpr size_t kListedSpecBytes = 4096;

// The body of POST /jobs as typed values; Cluster::submitJob checks what they mean together.
// "dependencies": [{"kind": "afterok", "job": 12}, ...]; absent: none.
Result<std::vector<model::Dependency>> readDependencies(const JsonInput& in) {
  std::vector<model::Dependency> out;
  if (!in.has("dependencies")) return out;
  const nlohmann::json& list = in.root()["dependencies"];
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument("dependencies: " + why, "dependencies");
  };
  if (!list.is_array()) return bad("must be a list of {\"kind\", \"job\"}");
  for (const auto& d : list) {
    if (!d.is_object() || !d.contains("kind") || !d["kind"].is_string() || !d.contains("job") ||
        !d["job"].is_number_integer())
      return bad("each entry is {\"kind\": \"afterok\"|\"afternotok\"|\"afterany\", \"job\": ID}");
    auto kind = model::parseDependencyKind(d["kind"].get<std::string>());
    if (!kind)
      return bad("kind '" + d["kind"].get<std::string>() +
                 "': expected afterok, afternotok or afterany");
    if (d.size() != 2) return bad("an entry has only kind and job");
    const int64_t job = d["job"].get<int64_t>();
    if (job <= 0) return bad("job must be a job id, got " + std::to_string(job));
    out.push_back({*kind, job});
  }
  return out;
}

Result<control::JobRequest> readJobRequest(const JsonInput& in) {
  control::JobRequest req;
  auto assign = [](auto& target, auto result) -> Status {
    if (!result.ok()) return result.status();
    target = std::move(result).value();
    return Status::Ok();
  };
  ALLOT_RETURN_IF_ERROR(assign(req.name, in.optionalString("name")));
  ALLOT_RETURN_IF_ERROR(assign(req.team, in.optionalString("team")));
  ALLOT_RETURN_IF_ERROR(assign(req.project, in.optionalString("project")));
  ALLOT_RETURN_IF_ERROR(assign(req.command, in.requiredStringArray("command")));
  ALLOT_RETURN_IF_ERROR(assign(req.env, in.optionalStringMap("env")));
  ALLOT_RETURN_IF_ERROR(
      assign(req.resources.gpus, in.optionalInt("gpus", 0, 0, model::kMaxRequestGpus)));
  // "gpu_model": "A100" is shorthand for "gpu_models": ["A100"].
  if (in.has("gpu_model") && in.has("gpu_models"))
    return Status::InvalidArgument("gpu_model: give gpu_models or gpu_model, not both",
                                   "gpu_model");
  std::string one;
  ALLOT_RETURN_IF_ERROR(assign(one, in.optionalString("gpu_model")));
  if (!one.empty()) req.resources.gpuModels = {one};
  if (in.has("gpu_models"))
    ALLOT_RETURN_IF_ERROR(assign(req.resources.gpuModels, in.optionalStringArray("gpu_models")));
  ALLOT_RETURN_IF_ERROR(assign(req.resources.gpuMilli, in.optionalInt("gpu_milli", 1000, 1, 1000)));
  ALLOT_RETURN_IF_ERROR(
      assign(req.resources.gpuMemoryMib,
             in.optionalInt("gpu_memory_mib", 0, 0, model::kMaxRequestGpuMemoryMib)));
  ALLOT_RETURN_IF_ERROR(assign(req.resources.cpuMillis,
                               in.optionalInt("cpu_millis", 0, 0, model::kMaxRequestCpuMillis)));
  ALLOT_RETURN_IF_ERROR(assign(req.resources.memoryMib,
                               in.optionalInt("memory_mib", 0, 0, model::kMaxRequestMemoryMib)));
  ALLOT_RETURN_IF_ERROR(assign(
      req.priority, in.optionalInt("priority", 0, control::kMinPriority, control::kMaxPriority)));
  ALLOT_RETURN_IF_ERROR(assign(req.preemptible, in.optionalBool("preemptible", false)));
  ALLOT_RETURN_IF_ERROR(assign(req.resources.wholeHost, in.optionalBool("whole_host", false)));
  ALLOT_RETURN_IF_ERROR(
      assign(req.resources.hosts, in.optionalInt("hosts", 1, 1, control::kMaxGangHosts)));
  std::string runtime;
  ALLOT_RETURN_IF_ERROR(assign(runtime, in.optionalString("max_runtime")));
  if (!runtime.empty()) {
    auto ms = parseDurationMs(runtime);
    if (!ms.ok())
      return Status::InvalidArgument("max_runtime: " + ms.status().message(), "max_runtime");
    if (*ms <= 0)
      return Status::InvalidArgument("max_runtime: must be positive, got '" + runtime + "'",
                                     "max_runtime");
    req.maxRuntimeMs = *ms;
  }
  ALLOT_RETURN_IF_ERROR(assign(req.resources.minDriver, in.optionalString("min_driver")));
  ALLOT_RETURN_IF_ERROR(assign(req.resources.minCuda, in.optionalString("min_cuda")));
  ALLOT_RETURN_IF_ERROR(assign(req.queueAnyway, in.optionalBool("queue_anyway", false)));
  ALLOT_RETURN_IF_ERROR(assign(req.contour, in.optionalString("contour")));
  ALLOT_RETURN_IF_ERROR(assign(req.dependencies, readDependencies(in)));
  ALLOT_RETURN_IF_ERROR(assign(req.workdir, in.optionalString("workdir")));
  ALLOT_RETURN_IF_ERROR(assign(req.image, in.optionalString("image")));
  std::string array;
  ALLOT_RETURN_IF_ERROR(assign(array, in.optionalString("array")));
  if (in.has("array")) ALLOT_RETURN_IF_ERROR(assign(req.array, control::parseArraySpec(array)));
  return req;
}

}  // namespace

void registerRoutes(Router& router, Server& s) {
  using V = http::verb;

  router.add(
      V::get, "/healthz",
      [](ApiRequest&) -> Awaitable {
        co_return ApiResponse::json({{"status", "ok"}});
      },
      false);

  router.add(
      V::get, "/api/v1/openapi.json",
      [](ApiRequest&) -> Awaitable {
        co_return ApiResponse{http::status::ok, openApiDocument(), "application/json", {}};
      },
      false);

  // ---- teams, users, projects ----
  router.add(V::post, "/api/v1/teams", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"name"}));
    TRY_ASSIGN(name, in.requiredString("name"));
    TRY_ASSIGN(change, s.cluster().access().createTeam(r.who(), name));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value), http::status::created);
  });
  router.add(V::get, "/api/v1/teams", [&s](ApiRequest& r) -> Awaitable {
    co_return ApiResponse::json(arrayOf(s.cluster().access().listTeams(r.who())));
  });
  // The images a team's work may run in (docs/environments.md, "Allow-list").
  auto imageAllowJson = [](const model::Team& t) {
    return nlohmann::json{{"team", t.name}, {"allow", t.imageAllow}};
  };
  router.add(V::get, "/api/v1/teams/{team}/image-allow",
             [&s, imageAllowJson](ApiRequest& r) -> Awaitable {
               TRY_ASSIGN(team, s.cluster().access().team(r.who(), r.params["team"]));
               co_return ApiResponse::json(imageAllowJson(team));
             });
  router.add(
      V::put, "/api/v1/teams/{team}/image-allow", [&s, imageAllowJson](ApiRequest& r) -> Awaitable {
        TRY_ASSIGN(in, readBody(r, {"allow"}));
        TRY_ASSIGN(allow, in.requiredStringArray("allow"));
        TRY_ASSIGN(change, s.cluster().access().setImageAllow(r.who(), r.params["team"], allow));
        co_await s.apply(r, change);
        co_return ApiResponse::json(imageAllowJson(change.value));
      });
  // What a team's work runs in when it names no image (docs/environments.md, "Default images").
  auto defaultImageJson = [](const model::Team& t) {
    return nlohmann::json{{"team", t.name}, {"default_image", t.defaultImage}};
  };
  router.add(V::get, "/api/v1/teams/{team}/default-image",
             [&s, defaultImageJson](ApiRequest& r) -> Awaitable {
               TRY_ASSIGN(team, s.cluster().access().team(r.who(), r.params["team"]));
               co_return ApiResponse::json(defaultImageJson(team));
             });
  router.add(V::put, "/api/v1/teams/{team}/default-image",
             [&s, defaultImageJson](ApiRequest& r) -> Awaitable {
               TRY_ASSIGN(in, readBody(r, {"image"}));
               TRY_ASSIGN(image, in.requiredString("image"));
               TRY_ASSIGN(change,
                          s.cluster().access().setDefaultImage(r.who(), r.params["team"], image));
               co_await s.apply(r, change);
               co_return ApiResponse::json(defaultImageJson(change.value));
             });
  // A team's logins to registries (docs/environments.md, "Registry credentials"): the password
  // goes in and never comes back out.
  auto loginsJson = [](const model::Team& t) { return model::toJson(t).at("registry_logins"); };
  router.add(V::get, "/api/v1/teams/{team}/registry-logins",
             [&s, loginsJson](ApiRequest& r) -> Awaitable {
               TRY_ASSIGN(team, s.cluster().access().team(r.who(), r.params["team"]));
               co_return ApiResponse::json(loginsJson(team));
             });
  router.add(V::put, "/api/v1/teams/{team}/registry-logins/{registry}",
             [&s, loginsJson](ApiRequest& r) -> Awaitable {
               TRY_ASSIGN(in, readBody(r, {"username", "password"}));
               TRY_ASSIGN(username, in.requiredString("username"));
               TRY_ASSIGN(password, in.requiredString("password"));
               TRY_ASSIGN(change,
                          s.cluster().registryLogins().set(
                              r.who(), r.params["team"], r.params["registry"], username, password));
               co_await s.apply(r, change);
               co_return ApiResponse::json(loginsJson(change.value));
             });
  router.add(V::delete_, "/api/v1/teams/{team}/registry-logins/{registry}",
             [&s, loginsJson](ApiRequest& r) -> Awaitable {
               TRY_ASSIGN(change, s.cluster().registryLogins().remove(r.who(), r.params["team"],
                                                                      r.params["registry"]));
               co_await s.apply(r, change);
               co_return ApiResponse::json(loginsJson(change.value));
             });

  router.add(V::post, "/api/v1/projects", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"name", "team"}));
    TRY_ASSIGN(name, in.requiredString("name"));
    TRY_ASSIGN(team, in.optionalString("team"));
    TRY_ASSIGN(change, s.cluster().access().createProject(r.who(), name, team));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value), http::status::created);
  });
  router.add(V::get, "/api/v1/projects", [&s](ApiRequest& r) -> Awaitable {
    co_return ApiResponse::json(arrayOf(s.cluster().access().listProjects(r.who())));
  });

  // ---- hosts ----
  router.add(V::post, "/api/v1/hosts/join-tokens", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"ttl", "uses"}));
    TRY_ASSIGN(ttlText, in.optionalString("ttl", "24h"));
    auto ttl = parseDurationMs(ttlText);
    if (!ttl.ok())
      co_return ApiResponse::error(
          Status::InvalidArgument("ttl: " + ttl.status().message(), "ttl"));
    TRY_ASSIGN(uses, in.optionalInt("uses", 1, 1, control::kMaxJoinTokenUses));
    TRY_ASSIGN(change, s.cluster().hosts().createJoinToken(r.who(), *ttl, uses));
    co_await s.apply(r, change);
    auto out = joinTokenJson(change.value.token, s.clock().nowMs());
    out["token"] = change.value.secret;
    co_return ApiResponse::json(out, http::status::created);
  });
  // Before /hosts/{name}: the router takes the first pattern that matches.
  router.add(V::get, "/api/v1/hosts/join-tokens", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(tokens, s.cluster().hosts().listJoinTokens(r.who()));
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : tokens) out.push_back(joinTokenJson(t, s.clock().nowMs()));
    co_return ApiResponse::json(out);
  });
  router.add(V::delete_, "/api/v1/hosts/join-tokens/{id}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(change, s.cluster().hosts().revokeJoinToken(r.who(), r.params["id"]));
    co_await s.apply(r, change);
    co_return ApiResponse::json(joinTokenJson(change.value, s.clock().nowMs()));
  });
  router.add(V::post, "/api/v1/hosts/{name}/reset-credential", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(change, s.cluster().hosts().resetHostCredential(r.who(), r.params["name"]));
    co_await s.apply(r, change);
    co_return ApiResponse::json({{"host", change.value.name}, {"credential_reset", true}});
  });

  router.add(
      V::post, "/api/v1/hosts/join",
      [&s](ApiRequest& r) -> Awaitable {
        TRY_ASSIGN(in, readBody(r, {"name", "join_token", "inventory"}));
        TRY_ASSIGN(name, in.optionalString("name"));
        TRY_ASSIGN(secret, in.requiredString("join_token"));
        const auto* invJson = in.object("inventory");
        if (!invJson)
          co_return ApiResponse::error(
              Status::InvalidArgument("inventory: required object", "inventory"));
        auto inv = model::inventoryFromJson(*invJson);
        if (!inv.ok())
          co_return ApiResponse::error(
              Status::InvalidArgument("inventory: " + inv.status().message(), "inventory"));
        TRY_ASSIGN(change, s.cluster().hosts().joinHost(secret, name, *inv));
        co_await s.apply(r, change);
        co_return ApiResponse::json(
            {{"host", model::toJson(change.value.host)}, {"credential", change.value.credential}});
      },
      false);

  router.add(V::get, "/api/v1/hosts", [&s](ApiRequest& r) -> Awaitable {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& h : s.cluster().hosts().listHosts(r.who())) {
      out.push_back(hostJsonFor(r.who(), h));
      out.back()["lease"] = hostLeaseJson(s, r.who(), h.name);
    }
    co_return ApiResponse::json(out);
  });
  router.add(V::get, "/api/v1/hosts/{name}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(host, s.cluster().hosts().getHost(r.who(), r.params["name"]));
    auto out = hostJsonFor(r.who(), host);
    out["lease"] = hostLeaseJson(s, r.who(), host.name);
    nlohmann::json allocs = nlohmann::json::array();
    std::map<int, nlohmann::json> holders;  // by GPU index
    for (const auto& a : s.cluster().hosts().allocations(r.who(), host.name)) {
      // Holders from other teams are shown as busy without naming them.
      bool visible = control::authz::canSeeTeam(r.who(), a.team);
      auto named = [&](nlohmann::json v) { return visible ? v : nlohmann::json(nullptr); };
      nlohmann::json alloc = {
          {"gpu_index", a.gpuIndex},
          {"job_id", named(a.jobId)},
          {"team", named(a.team)},
          {"project", named(a.project)},
          {"user", named(a.user)},
          {"gpu_milli", a.gpuMilli},
          {"since", a.since ? nlohmann::json(formatIso8601(a.since)) : nlohmann::json(nullptr)}};
      allocs.push_back(alloc);
      alloc.erase("gpu_index");
      holders[a.gpuIndex].push_back(std::move(alloc));
    }
    out["allocations"] = allocs;
    // Per GPU: who holds it (several jobs when fractions share it) and its readings now, absent
    // when the agent has sent none lately.
    const TimeMs now = s.clock().nowMs();
    for (auto& g : out["gpus"]) {
      const int index = g.value("index", -1);
      auto h = holders.find(index);
      g["holders"] = h == holders.end() ? nlohmann::json::array() : h->second;
      const auto* t = s.cluster().world().freshTelemetry(host.name, index, now);
      if (!t) continue;
      nlohmann::json readings = model::toJson(t->sample);
      readings.erase("index");
      readings.erase("pids");  // host-local process ids mean nothing to API users
      readings["sampled_at"] = formatIso8601(t->sampledAt);
      g["telemetry"] = readings;
    }
    co_return ApiResponse::json(out);
  });

  // ---- jobs ----
  router.add(V::post, "/api/v1/jobs", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(
        in,
        readBody(r, {"name",         "team",         "project",    "command",     "env",
                     "gpus",         "gpu_model",    "gpu_models", "gpu_milli",   "gpu_memory_mib",
                     "cpu_millis",   "memory_mib",   "priority",   "preemptible", "whole_host",
                     "hosts",        "max_runtime",  "min_driver", "min_cuda",    "contour",
                     "queue_anyway", "dependencies", "workdir",    "array",       "image"}));
    TRY_ASSIGN(req, readJobRequest(in));
    const size_t tasks = req.array ? req.array->indices.size() : 0;
    TRY_ASSIGN(change, s.cluster().submitJob(r.who(), std::move(req)));
    const model::Job submitted = std::move(change.value);
    co_await s.apply(r, std::move(change));
    // An array answers with its first task, and the ids of all (in a row from the first).
    auto withTasks = [id = submitted.id, tasks](nlohmann::json job) {
      if (tasks == 0) return job;
      nlohmann::json ids = nlohmann::json::array();
      for (size_t t = 0; t < tasks; ++t) ids.push_back(id + static_cast<int64_t>(t));
      job["array_tasks"] = std::move(ids);
      return job;
    };
    ApiResponse res{http::status::created, {}, "application/json", {}};
    if (auto text = jobText(s.cluster(), submitted, {0, tasks, nullptr})) {
      res.body = std::move(*text);
      res.shownId = submitted.id;
    } else {
      res.setJson(withTasks(jobJson(s.cluster(), submitted)));
    }
    // The scheduling pass usually runs while the submission is being committed: the reply shows
    // the job as it is then (placed, or with its real wait reason).
    // Only the id is kept: a job's command and environment may be 512 KiB.
    res.refreshAfterWrite =
        [&s, who = r.who(), id = submitted.id, tasks, withTasks, passes = s.passesRun(),
         revision = s.cluster().world().jobRevision(submitted.id)](ApiResponse& out) {
          if (s.passesRun() == passes) return;  // nothing has touched the job since
          if (!out.value) {
            // Written as text: written again from the job as it is now, as getJob shows it.
            const auto& jobs = s.cluster().world().jobs;
            auto it = jobs.find(id);
            if (it != jobs.end() && control::authz::canSeeJob(who, it->second)) {
              const model::Job& now = it->second;
              std::string reason;
              JobTextOptions shown{0, tasks, nullptr};
              if (now.state == model::JobState::kQueued) {
                reason = s.cluster().waitReason(now);
                shown.reason = &reason;
              }
              if (auto text = jobText(s.cluster(), now, shown)) {
                out.body = std::move(*text);
                return;
              }
            }
          } else if (out.value.use_count() == 1) {
            // The audit has read the value by now; while anything else holds it, it is not
            // edited.
            if (auto changed = refreshWait(s.cluster(), who, id, revision, *out.value)) {
              if (*changed) out.body = ApiResponse::dumpBody(*out.value);
              return;
            }
          }
          if (auto now = s.cluster().getJob(who, id); now.ok())
            out.setJson(withTasks(jobJson(s.cluster(), *now)));
        };
    co_return res;
  });

  router.add(V::get, "/api/v1/jobs", [&s](ApiRequest& r) -> Awaitable {
    control::JobFilter f;
    // state=queued,running: any of them.
    if (auto it = r.query.find("state"); it != r.query.end() && !it->second.empty()) {
      std::string_view rest = it->second;
      while (!rest.empty()) {
        const size_t comma = rest.find(',');
        const std::string one(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        auto state = model::parseJobState(one);
        if (!state)
          co_return ApiResponse::error(
              Status::InvalidArgument("state: unknown job state '" + one + "'", "state"));
        f.states.insert(*state);
      }
    }
    if (auto it = r.query.find("team"); it != r.query.end()) f.team = it->second;
    if (auto it = r.query.find("user"); it != r.query.end()) f.user = it->second;
    // Times: ISO 8601 ("2026-11-30T08:00:00Z") or relative to now ("-2h").
    for (auto [key, target] :
         {std::pair{"since", &f.submittedSince}, {"until", &f.submittedUntil}}) {
      auto it = r.query.find(key);
      if (it == r.query.end() || it->second.empty()) continue;
      auto t = parseTime(it->second, s.clock().nowMs());
      if (!t.ok())
        co_return ApiResponse::error(
            Status::InvalidArgument(std::string(key) + ": " + t.status().message(), key));
      *target = *t;
    }
    TRY_ASSIGN(limit, queryInt(r, "limit", 1000, 1, 10000));
    f.limit = static_cast<size_t>(limit);
    // Serialized job by job: a long listing never exists as one JSON tree in memory.
    std::string body = "[";
    s.cluster().visitJobs(r.who(), f, [&](const model::Job& j) {
      if (body.size() > 1) body += ',';
      if (auto text = jobText(s.cluster(), j, {kListedSpecBytes, 0, nullptr})) {
        body += *text;
      } else {
        body += ApiResponse::dumpBody(jobJson(s.cluster(), j, kListedSpecBytes));
      }
    });
    body += ']';
    co_return ApiResponse{http::status::ok, std::move(body), "application/json", {}};
  });

  router.add(V::get, "/api/v1/jobs/{id}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(id, parseJobId(r.params["id"]));
    TRY_ASSIGN(job, s.cluster().getJob(r.who(), id));
    if (auto text = jobText(s.cluster(), job)) {
      co_return ApiResponse{http::status::ok, std::move(*text), "application/json", {}};
    }
    co_return ApiResponse::json(jobJson(s.cluster(), job));
  });

  // Prometheus scrapes this with a platform admin's token (deploy/prometheus.yml): the labels
  // name every team, user and host.
  router.add(V::get, "/metrics", [&s](ApiRequest& r) -> Awaitable {
    if (Status st = control::authz::requireAdmin(r.who(), "read the metrics"); !st.ok())
      co_return ApiResponse::error(st);
    co_return ApiResponse{http::status::ok,
                          renderMetrics(s.cluster().world(), s.metrics(), s.clock().nowMs()),
                          "text/plain; version=0.0.4; charset=utf-8",
                          {}};
  });

  // Why a job waits, or how it was placed, as the last scheduling pass decided.
  router.add(V::get, "/api/v1/jobs/{id}/explain", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(id, parseJobId(r.params["id"]));
    TRY_ASSIGN(out, s.cluster().explainJob(r.who(), id));
    co_return ApiResponse::json(std::move(out));
  });

  router.add(V::get, "/api/v1/jobs/{id}/logs", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(id, parseJobId(r.params["id"]));
    TRY_ASSIGN(offset, queryInt(r, "offset", 0, 0, INT64_MAX));
    TRY_ASSIGN(wait, queryInt(r, "wait", 0, 0, 30));
    TRY_ASSIGN(rank64, queryInt(r, "rank", 0, 0, control::kMaxGangHosts - 1));
    TRY_ASSIGN(job, s.cluster().getJob(r.who(), id));
    const int rank = static_cast<int>(rank64);
    // since=T: from output received at or after T (ISO 8601 or relative, "-10m"), to within a
    // second; the answer's X-Allot-Log-Offset says where that is, for the next read.
    std::optional<int64_t> sinceOffset;
    if (auto since = r.query.find("since"); since != r.query.end()) {
      if (r.query.count("offset"))
        co_return ApiResponse::error(
            Status::InvalidArgument("since: give offset or since, not both", "since"));
      auto t = parseTime(since->second, s.clock().nowMs());
      if (!t.ok())
        co_return ApiResponse::error(
            Status::InvalidArgument("since: " + t.status().message(), "since"));
      sinceOffset = s.logs().offsetAt(id, *t, rank);
      offset = *sinceOffset;
    }
    if (rank >= job.resources.hosts)
      co_return ApiResponse::error(Status::InvalidArgument(
          "rank: job " + std::to_string(id) + " has ranks 0.." +
              std::to_string(job.resources.hosts - 1) + ", got " + std::to_string(rank),
          "rank"));
    if (wait > 0 && s.logs().size(id, rank) <= offset && !model::isTerminal(job.state)) {
      co_await s.waitForJobNews(id, std::chrono::seconds(wait));
      TRY_ASSIGN(again, s.cluster().getJob(r.who(), id));
      job = std::move(again);
    }
    TRY_ASSIGN(data, s.logs().read(id, offset, 4 << 20, rank));
    ApiResponse res{http::status::ok, std::move(data), "text/plain; charset=utf-8", {}};
    res.headers.emplace_back("X-Allot-Log-Size", std::to_string(s.logs().size(id, rank)));
    res.headers.emplace_back("X-Allot-Job-State", model::jobStateName(job.state));
    if (sinceOffset) res.headers.emplace_back("X-Allot-Log-Offset", std::to_string(*sinceOffset));
    co_return res;
  });

  // Job controls: hold, release, requeue (Cluster::holdJob and the rest). A requeue stops the
  // job through the preemption path, whose agents hear once it is durable.
  using Control =
      Result<control::Change<model::Job>> (control::Cluster::*)(const control::Principal&, int64_t);
  for (auto [verb, act] : {std::pair<const char*, Control>{"hold", &control::Cluster::holdJob},
                           {"release", &control::Cluster::releaseJob},
                           {"requeue", &control::Cluster::requeueJob}}) {
    const bool stops = std::string_view(verb) == "requeue";
    router.add(V::post, std::string("/api/v1/jobs/{id}/") + verb,
               [&s, act, stops](ApiRequest& r) -> Awaitable {
                 TRY_ASSIGN(in, readBody(r, {}));
                 (void)in;
                 TRY_ASSIGN(id, parseJobId(r.params["id"]));
                 TRY_ASSIGN(change, (s.cluster().*act)(r.who(), id));
                 co_await s.apply(r, change);
                 s.notifyJob(r, id);
                 ApiResponse res = ApiResponse::json(jobJson(s.cluster(), change.value));
                 // The stop is confirmed only once the request's write is durable (this runs
                 // then, before its agents are pushed to): a crash must not stop work that the
                 // restarted allotd still thinks is running.
                 if (stops)
                   res.refreshAfterWrite = [&s, id](ApiResponse&) {
                     s.cluster().evictionsDurable({id});
                   };
                 co_return res;
               });
  }

  router.add(V::post, "/api/v1/jobs/{id}/cancel", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {}));
    (void)in;
    TRY_ASSIGN(id, parseJobId(r.params["id"]));
    TRY_ASSIGN(change, s.cluster().cancelJob(r.who(), id));
    co_await s.apply(r, change);
    s.notifyJob(r, id);
    co_return ApiResponse::json(jobJson(s.cluster(), change.value));
  });

  // The agent stream is a WebSocket upgrade handled before routing; this entry keeps it in the
  // route table (and so in the OpenAPI check) and answers plain GETs clearly.
  router.add(
      V::get, "/api/v1/agent/stream",
      [](ApiRequest&) -> Awaitable {
        co_return ApiResponse::error(Status::InvalidArgument(
            "the agent stream needs a WebSocket upgrade with a host credential"));
      },
      false);

  registerAccessRoutes(router, s);
  registerSharingRoutes(router, s);
  registerHostLifecycleRoutes(router, s);
  registerHandoverRoutes(router, s);
  registerUsageRoutes(router, s);
  registerUsageSeriesRoutes(router, s);
  // Live updates for the web console; Server::serveHttp streams it (api/event_stream.h).
  router.addEventStream("/api/v1/stream");
  registerTelemetryRoutes(router, s);
  registerImageRoutes(router, s);
  registerMapRoutes(router, s);
  registerIdleRoutes(router, s);
  registerUpgradeRoutes(router, s);
  registerLeaseRoutes(router, s);
  registerProfileRoutes(router, s);
  registerSessionRoutes(router, s);
  registerAuditRoutes(router, s);
}

}  // namespace allot::api
