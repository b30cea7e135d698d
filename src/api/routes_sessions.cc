// Routes for interactive sessions: create, list, show, stop, share. Shapes in docs/api.md; what
// they mean in docs/sessions.md. The proxy to a session's Jupyter (/sessions/{id}/) is served by
// session_proxy.cc, not here.

#include <charconv>

#include "api/json_input.h"
#include "api/route_helpers.h"
#include "api/server.h"
#include "api/session_json.h"
#include "common/time_format.h"
#include "model/resource_limits.h"

namespace allot::api {
namespace {

Result<int64_t> parseSessionId(const std::string& s) { return parsePathId(s, "a session"); }

Result<control::SessionRequest> readSessionRequest(const std::string& body) {
  auto in = JsonInput::parse(body, {"profile", "name", "team", "project", "gpus", "gpu_milli",
                                    "cpu_millis", "memory_mib", "storage"});
  if (!in.ok()) return in.status();
  control::SessionRequest r;
  for (auto [field, target] : {std::pair{"profile", &r.profile},
                               {"name", &r.name},
                               {"team", &r.team},
                               {"project", &r.project},
                               {"storage", &r.storage}}) {
    auto v = in->optionalString(field);
    if (!v.ok()) return v.status();
    *target = *v;
  }
  if (!r.storage.empty() && r.storage != "local" && r.storage != "scratch" && r.storage != "shared")
    return Status::InvalidArgument(
        "storage: expected local, scratch or shared, got '" + r.storage + "'", "storage");
  if (in->has("gpus")) {
    auto v = in->optionalInt("gpus", 0, 0, model::kMaxRequestGpus);
    if (!v.ok()) return v.status();
    r.gpus = *v;
  }
  if (in->has("gpu_milli")) {
    auto v = in->optionalInt("gpu_milli", 1000, 1, 1000);
    if (!v.ok()) return v.status();
    r.gpuMilli = *v;
    if (*v < 1000 && r.gpus && *r.gpus != 1)
      return Status::InvalidArgument("gpu_milli: a share of a GPU needs gpus = 1", "gpu_milli");
  }
  if (in->has("cpu_millis")) {
    auto v = in->optionalInt("cpu_millis", 0, 0, model::kMaxRequestCpuMillis);
    if (!v.ok()) return v.status();
    r.cpuMillis = *v;
  }
  if (in->has("memory_mib")) {
    auto v = in->optionalInt("memory_mib", 0, 0, model::kMaxRequestMemoryMib);
    if (!v.ok()) return v.status();
    r.memoryMib = *v;
  }
  return r;
}

}  // namespace

void registerSessionRoutes(Router& router, Server& s) {
  using V = http::verb;

  router.add(V::post, "/api/v1/sessions", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(req, readSessionRequest(r.raw.body()));
    TRY_ASSIGN(change, s.cluster().sessions().create(r.who(), std::move(req)));
    co_await s.apply(r, change);
    ApiResponse res = ApiResponse::json(sessionJson(s, change.value), http::status::created);
    // Usually placed by the pass that runs while the creation is being committed.
    res.refreshAfterWrite = [&s, who = r.who(), id = change.value.id,
                             passes = s.passesRun()](ApiResponse& out) {
      if (s.passesRun() == passes) return;  // nothing has touched the session since
      if (auto now = s.cluster().sessions().get(who, id); now.ok())
        out.setJson(sessionJson(s, *now));
    };
    co_return res;
  });

  router.add(V::get, "/api/v1/sessions", [&s](ApiRequest& r) -> Awaitable {
    auto flag = [&](const char* key) -> Result<bool> {
      auto it = r.query.find(key);
      if (it == r.query.end() || it->second == "false" || it->second == "0") return false;
      if (it->second.empty() || it->second == "true" || it->second == "1") return true;
      return Status::InvalidArgument(std::string(key) + ": expected true or false", key);
    };
    TRY_ASSIGN(all, flag("all"));
    TRY_ASSIGN(ended, flag("ended"));
    nlohmann::json out = nlohmann::json::array();
    for (const auto& j : s.cluster().sessions().list(r.who(), all, !ended))
      out.push_back(sessionJson(s, j));
    co_return ApiResponse::json(out);
  });

  router.add(V::get, "/api/v1/sessions/{id}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(id, parseSessionId(r.params["id"]));
    TRY_ASSIGN(session, s.cluster().sessions().get(r.who(), id));
    co_return ApiResponse::json(sessionJson(s, session));
  });

  router.add(V::post, "/api/v1/sessions/{id}/stop", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {}));
    (void)in;
    TRY_ASSIGN(id, parseSessionId(r.params["id"]));
    TRY_ASSIGN(change, s.cluster().sessions().stop(r.who(), id));
    co_await s.apply(r, change);
    s.notifyJob(r, id);
    co_return ApiResponse::json(sessionJson(s, change.value));
  });

  router.add(V::put, "/api/v1/sessions/{id}/shared-with", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(id, parseSessionId(r.params["id"]));
    // Another team's session is 404 whatever the body says.
    TRY_ASSIGN(seen, s.cluster().sessions().get(r.who(), id));
    (void)seen;
    TRY_ASSIGN(in, readBody(r, {"users"}));
    TRY_ASSIGN(users, in.requiredStringArray("users"));
    TRY_ASSIGN(change, s.cluster().sessions().share(r.who(), id, std::move(users)));
    co_await s.apply(r, change);
    co_return ApiResponse::json(sessionJson(s, change.value));
  });
}

}  // namespace allot::api
