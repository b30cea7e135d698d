// Routes for accounting: the usage report over the allocation ledger and the use that GPU samples
// measured. Shapes in docs/api.md.

#include <cmath>

#include "api/route_helpers.h"
#include "api/server.h"
#include "common/time_format.h"
#include "control/usage_report.h"

namespace allot::api {
namespace {

constexpr double kMilliGpuMsPerGpuHour = 1000.0 * 3'600'000;

// The row's cost when every GPU model it used has a price; null otherwise (an unknown price is
// not a price of zero).
nlohmann::json costOf(const control::UsageRow& row, const std::map<std::string, double>& prices) {
  if (prices.empty()) return nullptr;
  double cost = 0;
  for (const auto& [model, milliGpuMs] : row.milliGpuMsByModel) {
    auto it = prices.find(model);
    if (it == prices.end()) return nullptr;
    cost += milliGpuMs / kMilliGpuMsPerGpuHour * it->second;
  }
  return std::round(cost * 100) / 100;
}

}  // namespace

void registerUsageRoutes(Router& router, Server& s) {
  using V = boost::beast::http::verb;
  router.add(V::get, "/api/v1/usage", [&s](ApiRequest& r) -> Awaitable {
    control::UsageQuery q;
    if (Status st = readUsageQuery(r.query, s.clock().nowMs(), q); !st.ok())
      co_return ApiResponse::error(st);
    TRY_ASSIGN(rows, s.cluster().accounting().usage(r.who(), q));
    const auto& prices = s.cluster().options().pricePerGpuHour;
    nlohmann::json out = nlohmann::json::array();
    for (const auto& row : rows) {
      // Without a single sample (no agent reported, or every reading lacked utilisation) the
      // use is unknown, which is not the same as zero.
      const bool measured = row.usage.measured > 0;
      auto hours = [&](int64_t v) -> nlohmann::json {
        if (!measured) return nullptr;
        return v / kMilliGpuMsPerGpuHour;
      };
      nlohmann::json efficiency = nullptr;
      if (measured && row.milliGpuMs > 0)
        efficiency = std::round(1e4 * row.usage.used / static_cast<double>(row.milliGpuMs)) / 1e4;
      out.push_back({{"name", row.name},
                     {"gpu_hours_allocated", row.milliGpuMs / kMilliGpuMsPerGpuHour},
                     {"gpu_hours_measured", row.usage.measured / kMilliGpuMsPerGpuHour},
                     {"gpu_hours_used", hours(row.usage.used)},
                     {"efficiency", efficiency},
                     {"idle_gpu_hours", hours(row.usage.idle)},
                     {"peak_gpus", row.peakMilli / 1000.0},
                     {"cost", costOf(row, prices)}});
    }
    // Jobs flagged idle right now (routes_idle.cc), whatever the window.
    TRY_ASSIGN(idle, idleAllocationsJson(s, r.who(), q.team));
    co_return ApiResponse::json({{"by", control::usageByName(q.by)},
                                 {"from", formatIso8601(q.from)},
                                 {"to", formatIso8601(q.to)},
                                 {"idle_below_percent", s.cluster().options().idleBelowPct},
                                 {"rows", std::move(out)},
                                 {"idle_allocations", std::move(idle)}});
  });
}

}  // namespace allot::api
