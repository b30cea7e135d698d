// Routes for idle allocations: the idle policy of a team or project, and the events that report
// on allocations. Shapes in docs/api.md; what they mean in docs/accounting.md.

#include <charconv>

#include "api/json_input.h"
#include "api/route_helpers.h"
#include "api/server.h"
#include "common/time_format.h"
#include "control/authz.h"
#include "model/json.h"

namespace allot::api {
namespace {

nlohmann::json timeOrNull(TimeMs t) {
  return t ? nlohmann::json(formatIso8601(t)) : nlohmann::json(nullptr);
}

// The webhook URL may hold a secret: only those who may change the policy see it (the platform's,
// which a team inherits, only platform admins); everyone else learns only whether there is one.
nlohmann::json policyJson(const control::Principal& p, const std::string& team,
                          const std::string& project, const control::EffectiveIdlePolicy& e) {
  const auto& pol = e.policy;
  const bool manager = e.source == control::PolicySource::kPlatform
                           ? p.isAdmin()
                           : control::authz::canManageTeam(p, team).ok();
  return {{"team", team},
          {"project", project.empty() ? nlohmann::json(nullptr) : nlohmann::json(project)},
          {"threshold_percent", pol.thresholdPct},
          {"after", formatDurationSpec(pol.afterMs)},
          {"action", model::idleActionName(pol.action)},
          {"grace", formatDurationSpec(pol.graceMs)},
          {"webhook", manager && !pol.webhook.empty() ? nlohmann::json(pol.webhook) : nullptr},
          {"webhook_set", !pol.webhook.empty()},
          {"source", control::policySourceName(e.source)}};
}

Result<std::optional<int64_t>> readDuration(const JsonInput& in, const char* field) {
  if (!in.has(field)) return std::optional<int64_t>();
  auto text = in.optionalString(field);
  if (!text.ok()) return text.status();
  auto ms = parseDurationMs(*text);
  if (!ms.ok())
    return Status::InvalidArgument(std::string(field) + ": " + ms.status().message(), field);
  return std::optional<int64_t>(*ms);
}

// The PUT body: every field optional; omitted ones keep what the owner sees now.
Result<control::IdlePolicyUpdate> readPolicyUpdate(const std::string& body) {
  auto in = JsonInput::parse(body, {"threshold_percent", "after", "action", "grace", "webhook"});
  if (!in.ok()) return in.status();
  control::IdlePolicyUpdate u;
  if (in->has("threshold_percent")) {
    if (in->root()["threshold_percent"].is_null())
      return Status::InvalidArgument("threshold_percent: must be a number, got null",
                                     "threshold_percent");
    auto v = in->optionalNumber("threshold_percent", 0);
    if (!v.ok()) return v.status();
    u.thresholdPct = *v;
  }
  auto after = readDuration(*in, "after");
  if (!after.ok()) return after.status();
  u.afterMs = *after;
  auto grace = readDuration(*in, "grace");
  if (!grace.ok()) return grace.status();
  u.graceMs = *grace;
  if (in->has("action")) {
    auto text = in->optionalString("action");
    if (!text.ok()) return text.status();
    auto action = model::parseIdleAction(*text);
    if (!action)
      return Status::InvalidArgument("action: must be 'notify' or 'reclaim', got '" + *text + "'",
                                     "action");
    u.action = *action;
  }
  if (in->has("webhook")) {  // null or "" removes it
    auto text = in->optionalString("webhook");
    if (!text.ok()) return text.status();
    u.webhook = *text;
  }
  return u;
}

Result<control::EventFilter> readEventFilter(const ApiRequest& r, TimeMs now) {
  control::EventFilter f;
  auto q = [&](const char* key) -> const std::string* {
    auto it = r.query.find(key);
    return it == r.query.end() || it->second.empty() ? nullptr : &it->second;
  };
  if (auto* team = q("team")) f.team = *team;
  if (auto* job = q("job")) {
    std::string_view v = *job;
    if (v.rfind("j-", 0) == 0) v.remove_prefix(2);
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), f.jobId);
    if (ec != std::errc() || p != v.data() + v.size() || f.jobId <= 0)
      return Status::InvalidArgument("job: '" + *job + "' is not a job id", "job");
  }
  if (auto* kind = q("kind")) {
    f.kind = model::parseEventKind(*kind);
    if (!f.kind)
      return Status::InvalidArgument(
          "kind: expected allocation_idle, allocation_busy_again, allocation_reclaimed, "
          "lease_changed or lease_preemption_notice, got '" +
              *kind + "'",
          "kind");
  }
  if (auto* since = q("since")) {
    auto t = parseTime(*since, now);
    if (!t.ok()) return Status::InvalidArgument("since: " + t.status().message(), "since");
    f.since = *t;
  }
  if (auto* limit = q("limit")) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(limit->data(), limit->data() + limit->size(), v);
    if (ec != std::errc() || p != limit->data() + limit->size() || v < 1 || v > 10'000)
      return Status::InvalidArgument("limit: must be an integer between 1 and 10000", "limit");
    f.limit = static_cast<size_t>(v);
  }
  return f;
}

}  // namespace

Result<nlohmann::json> idleAllocationsJson(Server& s, const control::Principal& p,
                                           const std::string& team) {
  auto idle = s.cluster().idle().flagged(p, team);
  if (!idle.ok()) return idle.status();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : *idle) {
    std::string hosts;
    for (const auto& h : a.hosts) hosts += (hosts.empty() ? "" : ",") + h;
    out.push_back(
        {{"job", a.jobId},
         {"team", a.team},
         {"project", a.project.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.project)},
         {"user", a.user},
         {"host", hosts},
         {"gpus", a.gpus},
         {"idle_since", timeOrNull(a.idleSince)},
         {"threshold", a.thresholdPct},
         {"reclaim_at", timeOrNull(a.reclaimAt)}});
  }
  return out;
}

void registerIdleRoutes(Router& router, Server& s) {
  using V = http::verb;

  router.add(V::get, "/api/v1/teams/{team}/idle-policy", [&s](ApiRequest& r) -> Awaitable {
    const std::string& team = r.params["team"];
    TRY_ASSIGN(policy, s.cluster().idle().policy(r.who(), team, ""));
    co_return ApiResponse::json(policyJson(r.who(), team, "", policy));
  });
  router.add(V::put, "/api/v1/teams/{team}/idle-policy", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(update, readPolicyUpdate(r.raw.body()));
    const std::string& team = r.params["team"];
    TRY_ASSIGN(change, s.cluster().idle().setPolicy(r.who(), team, "", update));
    co_await s.apply(r, change);
    co_return ApiResponse::json(policyJson(r.who(), team, "", change.value));
  });

  const char* projectPath = "/api/v1/teams/{team}/projects/{project}/idle-policy";
  router.add(V::get, projectPath, [&s](ApiRequest& r) -> Awaitable {
    const std::string &team = r.params["team"], &project = r.params["project"];
    TRY_ASSIGN(policy, s.cluster().idle().policy(r.who(), team, project));
    co_return ApiResponse::json(policyJson(r.who(), team, project, policy));
  });
  router.add(V::put, projectPath, [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(update, readPolicyUpdate(r.raw.body()));
    const std::string &team = r.params["team"], &project = r.params["project"];
    TRY_ASSIGN(change, s.cluster().idle().setPolicy(r.who(), team, project, update));
    co_await s.apply(r, change);
    co_return ApiResponse::json(policyJson(r.who(), team, project, change.value));
  });
  router.add(V::delete_, projectPath, [&s](ApiRequest& r) -> Awaitable {
    const std::string &team = r.params["team"], &project = r.params["project"];
    TRY_ASSIGN(change, s.cluster().idle().clearProjectPolicy(r.who(), team, project));
    co_await s.apply(r, change);
    co_return ApiResponse::json(policyJson(r.who(), team, project, change.value));
  });

  router.add(V::get, "/api/v1/events", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(filter, readEventFilter(r, s.clock().nowMs()));
    TRY_ASSIGN(events, s.cluster().eventLog().list(r.who(), filter));
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : events) out.push_back(model::toJson(e));
    co_return ApiResponse::json(out);
  });
}

}  // namespace allot::api
