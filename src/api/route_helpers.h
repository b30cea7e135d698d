#pragma once
// Small helpers shared by the files that register routes.

#include <charconv>
#include <map>
#include <string>

#include "api/json_input.h"
#include "api/server.h"
#include "common/time_format.h"
#include "control/usage_report.h"
#include "model/json.h"

namespace allot::api {

using Awaitable = boost::asio::awaitable<ApiResponse>;

// Binds `var` to the value of a Result, or replies with its error.
#define TRY_ASSIGN(var, expr)                                        \
  auto var##_r = (expr);                                             \
  if (!var##_r.ok()) co_return ApiResponse::error(var##_r.status()); \
  auto var = std::move(var##_r).value()

// The request's body read strictly (JsonInput::parse), noting that it is JSON
// (ApiRequest::bodyIsJson) for its audit entry.
inline Result<JsonInput> readBody(ApiRequest& r, std::initializer_list<const char*> allowed) {
  auto in = JsonInput::parse(r.raw.body(), allowed);
  r.bodyIsJson = in.ok() && r.raw.body().find_first_not_of(" \t\r\n") != std::string::npos;
  return in;
}

// A JSON array of the items' API forms.
template <typename T>
nlohmann::json arrayOf(const std::vector<T>& items) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& i : items) arr.push_back(model::toJson(i));
  return arr;
}

// A reason (for drains, handovers, states) is shown in lists and logs, not a document.
inline constexpr size_t kMaxReasonBytes = 1024;

// The body's optional "reason", at most kMaxReasonBytes; a longer one is a 400 naming it.
inline Result<std::string> readReason(const JsonInput& in) {
  auto reason = in.optionalString("reason");
  if (!reason.ok()) return reason.status();
  if (reason->size() > kMaxReasonBytes)
    return Status::InvalidArgument("reason: at most " + std::to_string(kMaxReasonBytes) + " bytes",
                                   "reason");
  return reason;
}

// A time window [from, to) from the query's `from` and `to` (ISO 8601 or relative to `now`):
// `to` defaults to now, `from` to `defaultMs` before `to`. A bad time is a 400 naming its
// parameter; so is `from` not before `to`.
struct TimeWindow {
  TimeMs from = 0;
  TimeMs to = 0;
};
inline Result<TimeWindow> parseWindow(const std::map<std::string, std::string>& query, TimeMs now,
                                      TimeMs defaultMs) {
  TimeWindow w{0, now};
  bool fromGiven = false;
  for (auto [key, target] : {std::pair{"to", &w.to}, {"from", &w.from}}) {
    auto it = query.find(key);
    if (it == query.end() || it->second.empty()) continue;
    auto t = parseTime(it->second, now);
    if (!t.ok())
      return Status::InvalidArgument(std::string(key) + ": " + t.status().message(), key);
    *target = *t;
    fromGiven = fromGiven || std::string_view(key) == "from";
  }
  if (!fromGiven) w.from = w.to - defaultMs;
  if (w.from >= w.to) return Status::InvalidArgument("from: must be before to", "from");
  return w;
}

// The query of the usage reports (/usage, /usage/series): `by` (team when absent), the window
// (`from`, `to`; the last 30 days by default) and `team`, into any query struct with those fields.
template <typename UsageQueryLike>
Status readUsageQuery(const std::map<std::string, std::string>& query, TimeMs now,
                      UsageQueryLike& q) {
  if (auto it = query.find("by"); it != query.end()) {
    auto by = control::parseUsageBy(it->second);
    if (!by)
      return Status::InvalidArgument(
          "by: expected team, project, user, host or gpu-model, got '" + it->second + "'", "by");
    q.by = *by;
  }
  auto window = parseWindow(query, now, 30LL * 24 * 3'600'000);
  if (!window.ok()) return window.status();
  q.from = window->from;
  q.to = window->to;
  if (auto it = query.find("team"); it != query.end()) q.team = it->second;
  return Status::Ok();
}

// A positive id from the path parameter `id`: `digits` is it without any prefix ("j-" of a job),
// `shown` as the caller sent it, `what` the object it names with its article ("a lease"), for the
// 400's message.
inline Result<int64_t> parsePathId(std::string_view digits, const std::string& shown,
                                   std::string_view what) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || p != digits.data() + digits.size() || v <= 0)
    return Status::InvalidArgument("id: '" + shown + "' is not " + std::string(what) + " id", "id");
  return v;
}
inline Result<int64_t> parsePathId(const std::string& s, std::string_view what) {
  return parsePathId(s, s, what);
}

// A GPU index from a path parameter.
inline Result<int> parseGpuIndex(const std::string& s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0)
    return Status::InvalidArgument("index: '" + s + "' is not a GPU index", "index");
  return v;
}

}  // namespace allot::api
