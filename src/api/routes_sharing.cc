// Routes for sharing the fleet: team quotas and their split among projects, hosts and GPUs
// dedicated to a team, GPUs in shared (fractional) mode. Shapes in docs/api.md.

#include <charconv>

#include "api/json_input.h"
#include "api/route_helpers.h"
#include "api/server.h"
#include "model/json.h"

namespace allot::api {
namespace {

constexpr int kMaxGuaranteedGpus = 100'000;

// {"A100": 4, "any": 2} -> {"A100": 4, "": 2}.
Result<std::map<std::string, int>> readGuarantee(const JsonInput& in) {
  auto g = in.optionalIntMap("guaranteed", 0, kMaxGuaranteedGpus);
  if (!g.ok()) return g.status();
  std::map<std::string, int> out;
  for (auto& [k, v] : *g) out[k == model::kAnyModelJsonKey ? "" : k] = v;
  return out;
}

// A limit: omitted keeps it (nullopt), null means none (-1).
Result<std::optional<int>> readLimit(const JsonInput& in, const char* field) {
  if (!in.has(field)) return std::optional<int>();
  auto v = in.optionalInt(field, -1, 0, kMaxGuaranteedGpus);
  if (!v.ok()) return v.status();
  return std::optional<int>(*v);
}

// {"prod": 4, "test": null}: a number sets that contour's limit, null removes it.
Result<std::map<std::string, std::optional<int>>> readContourLimits(const JsonInput& in) {
  std::map<std::string, std::optional<int>> out;
  if (!in.has("contour_limits")) return out;
  const auto& j = in.root()["contour_limits"];
  if (!j.is_object())
    return Status::InvalidArgument(
        "contour_limits: must be an object of contour -> GPUs (or null to remove)",
        "contour_limits");
  for (const auto& [contour, v] : j.items()) {
    if (v.is_null()) {
      out[contour] = std::nullopt;
    } else if (v.is_number_integer() && v.get<int64_t>() >= 0 &&
               v.get<int64_t>() <= kMaxGuaranteedGpus) {
      out[contour] = v.get<int>();
    } else {
      return Status::InvalidArgument("contour_limits." + contour +
                                         ": must be a number of GPUs between 0 and " +
                                         std::to_string(kMaxGuaranteedGpus) + ", or null",
                                     "contour_limits");
    }
  }
  return out;
}

nlohmann::json quotaViewJson(const control::TeamQuotaView& v) {
  auto out = model::quotaJson(v.team);
  out["team"] = v.team.name;
  nlohmann::json projects = nlohmann::json::array();
  for (const auto& p : v.projects)
    projects.push_back({{"name", p.name}, {"guaranteed", model::guaranteedJson(p.guaranteed)}});
  out["projects"] = projects;
  if (v.status) {
    out["status"] = {{"guaranteed", v.status->guaranteed},
                     {"within", v.status->within},
                     {"borrowed", v.status->borrowed},
                     {"lendable", v.status->lendable},
                     {"share", v.status->share}};
  }
  return out;
}

}  // namespace

void registerSharingRoutes(Router& router, Server& s) {
  using V = http::verb;

  router.add(V::put, "/api/v1/teams/{team}/quota", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"guaranteed", "borrow_limit", "lend_limit", "weight",
                                "lend_dedicated", "contour_limits", "overcommit"}));
    control::QuotaUpdate u;
    TRY_ASSIGN(limits, readContourLimits(in));
    u.contourLimits = std::move(limits);
    if (in.has("guaranteed")) {
      TRY_ASSIGN(g, readGuarantee(in));
      u.guaranteed = std::move(g);
    }
    TRY_ASSIGN(borrow, readLimit(in, "borrow_limit"));
    TRY_ASSIGN(lend, readLimit(in, "lend_limit"));
    u.borrowLimit = borrow;
    u.lendLimit = lend;
    if (in.has("weight")) {
      if (in.root()["weight"].is_null())
        co_return ApiResponse::error(
            Status::InvalidArgument("weight: must be a number, got null", "weight"));
      TRY_ASSIGN(w, in.optionalNumber("weight", 1.0));
      u.weight = w;
    }
    if (in.has("lend_dedicated")) {
      TRY_ASSIGN(ld, in.optionalBool("lend_dedicated", false));
      u.lendDedicated = ld;
    }
    TRY_ASSIGN(overcommit, in.optionalBool("overcommit", false));
    u.overcommit = overcommit;
    TRY_ASSIGN(change, s.cluster().quotas().setTeam(r.who(), r.params["team"], u));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });

  router.add(V::get, "/api/v1/teams/{team}/quota", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(view, s.cluster().quotas().ofTeam(r.who(), r.params["team"]));
    co_return ApiResponse::json(quotaViewJson(view));
  });

  router.add(
      V::put, "/api/v1/teams/{team}/projects/{project}/quota", [&s](ApiRequest& r) -> Awaitable {
        TRY_ASSIGN(in, readBody(r, {"guaranteed"}));
        if (!in.has("guaranteed"))
          co_return ApiResponse::error(
              Status::InvalidArgument("guaranteed: required", "guaranteed"));
        TRY_ASSIGN(g, readGuarantee(in));
        TRY_ASSIGN(change, s.cluster().quotas().setProject(r.who(), r.params["team"],
                                                           r.params["project"], std::move(g)));
        co_await s.apply(r, change);
        co_return ApiResponse::json(model::toJson(change.value));
      });

  router.add(V::put, "/api/v1/hosts/{name}/dedication", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"team"}));
    if (!in.has("team"))
      co_return ApiResponse::error(
          Status::InvalidArgument("team: required (a team, or null to return the host to the "
                                  "shared pool)",
                                  "team"));
    TRY_ASSIGN(team, in.optionalString("team"));
    TRY_ASSIGN(change, s.cluster().hosts().dedicateHost(r.who(), r.params["name"], team));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });

  router.add(V::put, "/api/v1/hosts/{name}/contour", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"contour"}));
    TRY_ASSIGN(contour, in.requiredString("contour"));
    TRY_ASSIGN(change, s.cluster().hosts().setHostContour(r.who(), r.params["name"], contour));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });

  router.add(V::put, "/api/v1/hosts/{name}/gpus/{index}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"dedicated_to", "shared"}));
    TRY_ASSIGN(index, parseGpuIndex(r.params["index"]));
    control::GpuSettings settings;
    if (in.has("dedicated_to")) {
      TRY_ASSIGN(team, in.optionalString("dedicated_to"));
      settings.dedicatedTo = team;
    }
    if (in.has("shared")) {
      if (in.root()["shared"].is_null())
        co_return ApiResponse::error(
            Status::InvalidArgument("shared: must be true or false, got null", "shared"));
      TRY_ASSIGN(shared, in.optionalBool("shared", false));
      settings.shared = shared;
    }
    TRY_ASSIGN(change, s.cluster().hosts().setGpu(r.who(), r.params["name"], index, settings));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });
}

}  // namespace allot::api
