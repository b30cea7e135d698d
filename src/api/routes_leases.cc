// Routes for leases: ask, list, show, approve, reject, extend, end. Shapes in docs/api.md; what
// they mean in docs/leases.md.

#include <charconv>

#include "api/json_input.h"
#include "api/route_helpers.h"
#include "api/server.h"
#include "common/time_format.h"
#include "control/authz.h"
#include "model/json.h"
#include "model/resource_limits.h"

namespace allot::api {
namespace {

Result<int64_t> parseLeaseId(const std::string& s) { return parsePathId(s, "a lease"); }

// A time field: ISO 8601, or relative to now ("+2h").
Result<TimeMs> readTime(const JsonInput& in, const char* field, TimeMs now) {
  auto text = in.requiredString(field);
  if (!text.ok()) return text.status();
  auto t = parseTime(*text, now);
  if (!t.ok())
    return Status::InvalidArgument(std::string(field) + ": " + t.status().message(), field);
  return *t;
}

Result<control::LeaseRequest> readLeaseRequest(const std::string& body, TimeMs now) {
  auto in = JsonInput::parse(
      body, {"team", "hosts", "count", "gpu_model", "min_gpus", "start", "end", "reason"});
  if (!in.ok()) return in.status();
  control::LeaseRequest r;
  auto team = in->requiredString("team");
  if (!team.ok()) return team.status();
  r.team = *team;
  auto hosts = in->optionalStringArray("hosts");
  if (!hosts.ok()) return hosts.status();
  r.hosts = *hosts;
  auto count = in->optionalInt("count", 0, 0, 1000);
  if (!count.ok()) return count.status();
  r.count = *count;
  auto model = in->optionalString("gpu_model");
  if (!model.ok()) return model.status();
  r.gpuModel = *model;
  auto minGpus = in->optionalInt("min_gpus", 0, 0, model::kMaxRequestGpus);
  if (!minGpus.ok()) return minGpus.status();
  r.minGpus = *minGpus;
  auto start = readTime(*in, "start", now);
  if (!start.ok()) return start.status();
  r.startAt = *start;
  auto end = readTime(*in, "end", now);
  if (!end.ok()) return end.status();
  r.endAt = *end;
  auto reason = readReason(*in);
  if (!reason.ok()) return reason.status();
  r.reason = *reason;
  return r;
}

// The optional {"reason": "..."} body of approve, reject and end; an empty body is fine.
Result<std::string> readReasonBody(const std::string& body) {
  if (body.empty()) return std::string();
  auto in = JsonInput::parse(body, {"reason"});
  if (!in.ok()) return in.status();
  return readReason(*in);
}

}  // namespace

nlohmann::json hostLeaseJson(Server& s, const control::Principal& p, const std::string& host) {
  auto l = s.cluster().leases().onHost(host);
  if (!l) return nullptr;
  // Another team's lease shows that the host is held, and when, but not for whom.
  const bool visible = control::authz::canSeeTeam(p, l->team);
  return {{"id", visible ? nlohmann::json(l->id) : nlohmann::json(nullptr)},
          {"team", visible ? nlohmann::json(l->team) : nlohmann::json(nullptr)},
          {"state", model::leaseStateName(l->state)},
          {"start", formatIso8601(l->startAt)},
          {"end", formatIso8601(l->endAt)}};
}

void registerLeaseRoutes(Router& router, Server& s) {
  using V = http::verb;

  router.add(V::get, "/api/v1/leases", [&s](ApiRequest& r) -> Awaitable {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& l : s.cluster().leases().list(r.who())) out.push_back(model::toJson(l));
    co_return ApiResponse::json(out);
  });
  router.add(V::post, "/api/v1/leases", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(request, readLeaseRequest(r.raw.body(), s.clock().nowMs()));
    TRY_ASSIGN(change, s.cluster().leases().create(r.who(), request));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value), http::status::created);
  });
  router.add(V::get, "/api/v1/leases/{id}", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(id, parseLeaseId(r.params["id"]));
    TRY_ASSIGN(lease, s.cluster().leases().get(r.who(), id));
    co_return ApiResponse::json(model::toJson(lease));
  });
  // Decisions on a lease: the same request (an optional reason) and the same answer.
  using Decision = Result<control::Change<model::Lease>> (control::LeaseService::*)(
      const control::Principal&, int64_t, const std::string&);
  for (auto [verb, decide] :
       {std::pair<const char*, Decision>{"approve", &control::LeaseService::approve},
        {"reject", &control::LeaseService::reject},
        {"end", &control::LeaseService::end}}) {
    router.add(V::post, std::string("/api/v1/leases/{id}/") + verb,
               [&s, decide](ApiRequest& r) -> Awaitable {
                 TRY_ASSIGN(id, parseLeaseId(r.params["id"]));
                 TRY_ASSIGN(reason, readReasonBody(r.raw.body()));
                 TRY_ASSIGN(change, (s.cluster().leases().*decide)(r.who(), id, reason));
                 co_await s.apply(r, change);
                 co_return ApiResponse::json(model::toJson(change.value));
               });
  }
  // What approving it would stop; nothing changes.
  router.add(V::get, "/api/v1/leases/{id}/impact", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(id, parseLeaseId(r.params["id"]));
    TRY_ASSIGN(impact, s.cluster().leases().approvalImpact(r.who(), id));
    auto out = control::impactJson(impact.stopped, impact.stopsAt);
    out["hosts"] = impact.hosts;
    co_return ApiResponse::json(out);
  });
  router.add(V::post, "/api/v1/leases/{id}/extend", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(id, parseLeaseId(r.params["id"]));
    TRY_ASSIGN(in, readBody(r, {"end"}));
    TRY_ASSIGN(end, readTime(in, "end", s.clock().nowMs()));
    TRY_ASSIGN(change, s.cluster().leases().extend(r.who(), id, end));
    co_await s.apply(r, change);
    co_return ApiResponse::json(model::toJson(change.value));
  });
}

}  // namespace allot::api
