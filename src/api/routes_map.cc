// The cluster map: every host the caller may see with, per GPU, who holds it and its readings
// now, in one compact answer. The console's overview draws it and refetches it on the live
// stream's changes, so at 1,000 hosts it is one request, not 1,001 (1.69 MB of JSON, somewhat less
// than GET /hosts without holders or readings). Visibility is GET /hosts/{name}'s: holders of
// other teams are busy but unnamed.

#include "api/host_view.h"
#include "api/route_helpers.h"
#include "api/server.h"
#include "common/time_format.h"
#include "control/authz.h"
#include "model/json.h"

namespace allot::api {
namespace {

using nlohmann::json;

json nullIfEmpty(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json holdersJson(const control::Principal& who, const std::vector<control::GpuAllocation>& held,
                 int gpu) {
  json out = json::array();
  for (const auto& a : held) {
    if (a.gpuIndex != gpu) continue;
    const bool visible = control::authz::canSeeTeam(who, a.team);
    out.push_back({{"job_id", visible ? json(a.jobId) : json(nullptr)},
                   {"team", visible ? json(a.team) : json(nullptr)},
                   {"user", visible ? json(a.user) : json(nullptr)},
                   {"gpu_milli", a.gpuMilli}});
  }
  return out;
}

json hostMapJson(Server& s, const control::Principal& who, const model::Host& h, TimeMs now) {
  const auto held = s.cluster().hosts().allocations(who, h.name);
  json gpus = json::array();
  for (const auto& g : h.gpus) {
    if (!control::authz::canSeeGpu(who, g)) continue;
    json gpu = {{"index", g.index},           {"model", g.model},
                {"memory_mib", g.memoryMib},  {"dedicated_to", nullIfEmpty(g.dedicatedTo)},
                {"shared", g.shared},         {"holders", holdersJson(who, held, g.index)},
                {"utilization_pct", nullptr}, {"memory_used_mib", nullptr}};
    if (const auto* t = s.cluster().world().freshTelemetry(h.name, g.index, now)) {
      if (t->sample.utilizationPct) gpu["utilization_pct"] = *t->sample.utilizationPct;
      if (t->sample.memoryUsedMib) gpu["memory_used_mib"] = *t->sample.memoryUsedMib;
    }
    gpus.push_back(std::move(gpu));
  }
  return {{"name", h.name},
          {"state", model::hostStateName(h.state)},
          {"admin_state", model::adminStateName(h.adminState)},
          {"admin_reason", nullIfEmpty(hideOtherTeams(who, h.adminReason))},
          {"simulated", h.simulated},
          {"dedicated_to", nullIfEmpty(h.dedicatedTo)},
          {"contour", nullIfEmpty(h.contour)},
          {"last_seen_at", formatIso8601(h.lastSeenAt)},
          {"gpus", std::move(gpus)}};
}

}  // namespace

void registerMapRoutes(Router& router, Server& s) {
  router.add(http::verb::get, "/api/v1/cluster/map", [&s](ApiRequest& r) -> Awaitable {
    const TimeMs now = s.clock().nowMs();
    json hosts = json::array();
    for (const auto& h : s.cluster().hosts().listHosts(r.who()))
      hosts.push_back(hostMapJson(s, r.who(), h, now));
    co_return ApiResponse::json({{"at", formatIso8601(now)}, {"hosts", std::move(hosts)}});
  });
}

}  // namespace allot::api
