// GET /api/v1/usage/series: the usage report over time, for the console's charts. Shapes in
// docs/api.md ("Usage over time").

#include <array>

#include "api/route_helpers.h"
#include "api/server.h"
#include "common/time_format.h"
#include "control/usage_series.h"

namespace allot::api {
namespace {

constexpr double kMilliGpuMsPerGpuHour = 1000.0 * 3'600'000;
constexpr int64_t kMaxBuckets = 1000;
constexpr int64_t kDefaultMaxBuckets = 100;
constexpr TimeMs kMinStepMs = 60'000;
// Default steps, from fine to coarse: the finest that keeps the window to kDefaultMaxBuckets.
constexpr std::array<TimeMs, 5> kDefaultSteps = {5 * 60'000, 15 * 60'000, 3'600'000, 6 * 3'600'000,
                                                 24 * 3'600'000};

Result<TimeMs> stepOf(const std::map<std::string, std::string>& query, TimeMs from, TimeMs to) {
  auto it = query.find("step");
  TimeMs step = 0;
  if (it == query.end() || it->second.empty()) {
    step = kDefaultSteps.back();
    for (TimeMs s : kDefaultSteps) {
      if (control::seriesBucketCount(from, to, s) <= kDefaultMaxBuckets) {
        step = s;
        break;
      }
    }
  } else {
    auto parsed = parseDurationMs(it->second);
    if (!parsed.ok()) return Status::InvalidArgument("step: " + parsed.status().message(), "step");
    if (*parsed < kMinStepMs)
      return Status::InvalidArgument("step: at least 1m, got '" + it->second + "'", "step");
    step = *parsed;
  }
  if (control::seriesBucketCount(from, to, step) > kMaxBuckets)
    return Status::InvalidArgument("step: the window would have more than " +
                                       std::to_string(kMaxBuckets) +
                                       " buckets; give a larger step or a shorter window",
                                   "step");
  return step;
}

}  // namespace

void registerUsageSeriesRoutes(Router& router, Server& s) {
  using V = boost::beast::http::verb;
  router.add(V::get, "/api/v1/usage/series", [&s](ApiRequest& r) -> Awaitable {
    control::SeriesQuery q;
    if (Status st = readUsageQuery(r.query, s.clock().nowMs(), q); !st.ok())
      co_return ApiResponse::error(st);
    TRY_ASSIGN(step, stepOf(r.query, q.from, q.to));
    q.step = step;
    TRY_ASSIGN(rows, s.cluster().accounting().usageSeries(r.who(), q));
    const int64_t buckets = control::seriesBucketCount(q.from, q.to, q.step);
    nlohmann::json times = nlohmann::json::array();
    for (int64_t b = 0; b < buckets; ++b) times.push_back((q.from + b * q.step) / 1000);
    nlohmann::json series = nlohmann::json::array();
    for (const auto& row : rows) {
      nlohmann::json allocated = nlohmann::json::array();
      nlohmann::json used = nlohmann::json::array();
      nlohmann::json idle = nlohmann::json::array();
      for (int64_t b = 0; b < buckets; ++b) {
        allocated.push_back(row.milliGpuMs[b] / kMilliGpuMsPerGpuHour);
        // No sample in the bucket: use unknown, which is not zero (as in /usage).
        const auto& u = row.usage[b];
        used.push_back(u.measured > 0 ? nlohmann::json(u.used / kMilliGpuMsPerGpuHour) : nullptr);
        idle.push_back(u.measured > 0 ? nlohmann::json(u.idle / kMilliGpuMsPerGpuHour) : nullptr);
      }
      series.push_back({{"name", row.name},
                        {"gpu_hours_allocated", std::move(allocated)},
                        {"gpu_hours_used", std::move(used)},
                        {"idle_gpu_hours", std::move(idle)}});
    }
    co_return ApiResponse::json({{"by", control::usageByName(q.by)},
                                 {"from", formatIso8601(q.from)},
                                 {"to", formatIso8601(q.to)},
                                 {"step", formatDurationSpec(q.step)},
                                 {"step_seconds", q.step / 1000},
                                 {"times", std::move(times)},
                                 {"series", std::move(series)}});
  });
}

}  // namespace allot::api
