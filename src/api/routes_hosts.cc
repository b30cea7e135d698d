// Routes for the host lifecycle: drain, resume, failed/retired, reprovision, and the record of
// transitions.
// Shapes in docs/api.md; semantics in docs/hosts.md.

#include "api/host_view.h"
#include "api/json_input.h"
#include "api/route_helpers.h"
#include "api/server.h"
#include "control/authz.h"
#include "model/json.h"

namespace allot::api {
namespace {

// Reprovisioning: long enough for a driver and CUDA install by default, a day at most.
constexpr int64_t kDefaultHookTimeoutMs = 30 * 60'000;
constexpr int64_t kMaxHookTimeoutMs = 24 * 3'600'000;

}  // namespace

// A drain's deadline ("30m"); none (0): running work may finish whenever it does.
Result<int64_t> readDrainDeadline(const std::string& text) {
  if (text.empty()) return int64_t{0};
  auto d = parseDurationMs(text);
  if (!d.ok() || *d <= 0)
    return Status::InvalidArgument(
        "deadline: '" + text + "' is not a positive duration (e.g. 30m, 2h)", "deadline");
  return *d;
}

void registerHostLifecycleRoutes(Router& router, Server& s) {
  using V = http::verb;

  // What a drain with that deadline would stop; nothing changes.
  router.add(V::get, "/api/v1/hosts/{name}/impact", [&s](ApiRequest& r) -> Awaitable {
    auto it = r.query.find("deadline");
    TRY_ASSIGN(deadlineMs, readDrainDeadline(it == r.query.end() ? "" : it->second));
    TimeMs stopsAt = 0;
    TRY_ASSIGN(stopped,
               s.cluster().hosts().drainImpact(r.who(), r.params["name"], deadlineMs, &stopsAt));
    co_return ApiResponse::json(control::impactJson(stopped, stopsAt));
  });

  router.add(V::post, "/api/v1/hosts/{name}/drain", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"deadline", "reason"}));
    TRY_ASSIGN(deadlineText, in.optionalString("deadline"));
    TRY_ASSIGN(deadlineMs, readDrainDeadline(deadlineText));
    TRY_ASSIGN(reason, readReason(in));
    TRY_ASSIGN(change,
               s.cluster().hosts().drainHost(r.who(), r.params["name"], deadlineMs, reason));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });

  router.add(V::post, "/api/v1/hosts/{name}/resume", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {}));
    TRY_ASSIGN(change, s.cluster().hosts().resumeHost(r.who(), r.params["name"]));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });

  router.add(V::post, "/api/v1/hosts/{name}/admin-state", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"state", "reason"}));
    TRY_ASSIGN(stateText, in.requiredString("state"));
    auto state = model::parseAdminState(stateText);
    if (!state || (*state != model::AdminState::kFailed && *state != model::AdminState::kRetired))
      co_return ApiResponse::error(Status::InvalidArgument(
          "state: must be failed or retired (use drain and resume for the others), got '" +
              stateText + "'",
          "state"));
    TRY_ASSIGN(reason, readReason(in));
    TRY_ASSIGN(change,
               s.cluster().hosts().setHostAdminState(r.who(), r.params["name"], *state, reason));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });

  router.add(V::post, "/api/v1/hosts/{name}/reprovision", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(in, readBody(r, {"profile", "timeout"}));
    TRY_ASSIGN(profile, in.optionalString("profile"));
    if (profile.empty()) profile = "default";
    TRY_ASSIGN(timeoutText, in.optionalString("timeout"));
    int64_t timeoutMs = kDefaultHookTimeoutMs;
    if (!timeoutText.empty()) {
      auto t = parseDurationMs(timeoutText);
      if (!t.ok() || *t <= 0 || *t > kMaxHookTimeoutMs)
        co_return ApiResponse::error(Status::InvalidArgument(
            "timeout: '" + timeoutText + "' is not a duration from 1s to 24h (e.g. 10m)",
            "timeout"));
      timeoutMs = *t;
    }
    TRY_ASSIGN(change,
               s.cluster().hosts().reprovisionHost(r.who(), r.params["name"], profile, timeoutMs));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });

  router.add(V::get, "/api/v1/hosts/{name}/events", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(transitions, s.cluster().hosts().hostTransitions(r.who(), r.params["name"]));
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : transitions) {
      nlohmann::json j = model::toJson(t);
      if (!control::authz::canSeeTaskOutput(r.who())) j["output"] = nullptr;
      if (!t.reason.empty()) j["reason"] = hideOtherTeams(r.who(), t.reason);
      out.push_back(std::move(j));
    }
    co_return ApiResponse::json(out);
  });
}

}  // namespace allot::api
