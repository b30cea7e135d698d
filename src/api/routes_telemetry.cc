// Routes for GPU history: a GPU's samples and rollups from telemetry.db. Shapes in docs/api.md.

#include <algorithm>

#include "api/route_helpers.h"
#include "api/server.h"
#include "common/time_format.h"
#include "control/authz.h"

namespace allot::api {
namespace {

constexpr TimeMs kDefaultWindowMs = 3'600'000;
constexpr size_t kMaxPoints = 10'000;

Result<telemetry::Resolution> parseResolution(const std::string& s) {
  if (s == "raw") return telemetry::Resolution::kRaw;
  if (s == "minute") return telemetry::Resolution::kMinute;
  if (s == "hour") return telemetry::Resolution::kHour;
  return Status::InvalidArgument("resolution: expected raw, minute or hour, got '" + s + "'",
                                 "resolution");
}

template <typename T>
nlohmann::json orNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

void registerTelemetryRoutes(Router& router, Server& s) {
  using V = boost::beast::http::verb;
  router.add(V::get, "/api/v1/hosts/{name}/gpus/{index}/history", [&s](ApiRequest& r) -> Awaitable {
    TRY_ASSIGN(index, parseGpuIndex(r.params["index"]));
    TRY_ASSIGN(host, s.cluster().hosts().getHost(r.who(), r.params["name"]));
    // A GPU dedicated to another team is not there for this caller, like in `host show`.
    const auto gpus = control::authz::visibleHost(r.who(), host).gpus;
    if (std::none_of(gpus.begin(), gpus.end(),
                     [&](const model::Gpu& g) { return g.index == index; }))
      co_return ApiResponse::error(
          Status::NotFound("host '" + host.name + "' has no GPU " + std::to_string(index)));
    TRY_ASSIGN(window, parseWindow(r.query, s.clock().nowMs(), kDefaultWindowMs));
    auto resolution = telemetry::Resolution::kMinute;
    if (auto it = r.query.find("resolution"); it != r.query.end()) {
      TRY_ASSIGN(res, parseResolution(it->second));
      resolution = res;
    }
    TRY_ASSIGN(points, s.telemetry().gpuHistory(host.name, index, window.from, window.to,
                                                resolution, kMaxPoints + 1));
    const bool truncated = points.size() > kMaxPoints;
    if (truncated) points.resize(kMaxPoints);
    nlohmann::json out = nlohmann::json::array();
    for (const auto& p : points) {
      out.push_back({{"at", formatIso8601(p.at)},
                     {"samples", p.samples},
                     {"utilization_pct", orNull(p.utilizationPct)},
                     {"memory_max_mib", orNull(p.memoryMaxMib)},
                     {"temperature_max_c", orNull(p.temperatureMaxC)},
                     {"power_w", orNull(p.powerW)}});
    }
    const char* names[] = {"raw", "minute", "hour"};
    co_return ApiResponse::json({{"host", host.name},
                                 {"gpu", index},
                                 {"resolution", names[static_cast<int>(resolution)]},
                                 {"from", formatIso8601(window.from)},
                                 {"to", formatIso8601(window.to)},
                                 {"truncated", truncated},
                                 {"points", std::move(out)}});
  });
}

}  // namespace allot::api
