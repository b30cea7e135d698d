// Routes for rolling upgrades: start one on a pool, list them, follow one. Shapes in docs/api.md;
// semantics in docs/hosts.md ("Rolling upgrades").

#include <charconv>

#include "api/json_input.h"
#include "api/route_helpers.h"
#include "api/server.h"
#include "model/json.h"

namespace allot::api {
namespace {

constexpr int kMaxUnavailableLimit = 1000;

Result<int64_t> parseUpgradeId(const std::string& s) { return parsePathId(s, "an upgrade"); }

// "30m", "2h"; absent or "" = no deadline (running work may finish).
Result<int64_t> readDrainDeadline(const JsonInput& in) {
  auto text = in.optionalString("drain_deadline");
  if (!text.ok()) return text.status();
  if (text->empty()) return int64_t{0};
  auto ms = parseDurationMs(*text);
  if (!ms.ok() || *ms <= 0)
    return Status::InvalidArgument(
        "drain_deadline: '" + *text + "' is not a positive duration (e.g. 30m, 2h)",
        "drain_deadline");
  return *ms;
}

}  // namespace

void registerUpgradeRoutes(Router& router, Server& s) {
  using V = http::verb;

  router.add(V::post, "/api/v1/upgrades", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"pool", "profile", "max_unavailable", "drain_deadline"}));
    TRY_ASSIGN(pool, in.requiredString("pool"));
    TRY_ASSIGN(profile, in.requiredString("profile"));
    TRY_ASSIGN(maxUnavailable, in.optionalInt("max_unavailable", 1, 1, kMaxUnavailableLimit));
    TRY_ASSIGN(deadlineMs, readDrainDeadline(in));
    TRY_ASSIGN(change, s.cluster().hosts().startUpgrade(r.who(), pool, profile, maxUnavailable,
                                                        deadlineMs));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value), http::status::created);
  });

  router.add(V::get, "/api/v1/upgrades", [&s](ApiRequest& r) -> Awaitable {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& u : s.cluster().hosts().listUpgrades(r.who())) out.push_back(model::toJson(u));
    co_return ApiResponse::json(out);
  });

  router.add(V::get, "/api/v1/upgrades/{id}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(id, parseUpgradeId(r.params["id"]));
    TRY_ASSIGN(u, s.cluster().hosts().getUpgrade(r.who(), id));
    co_return ApiResponse::json(model::toJson(u));
  });
}

}  // namespace allot::api
