// Routes for the audit log (docs/audit.md): a page of entries, newest first, and the JSON-lines
// export, oldest first. Platform admins only: the log holds every team's changes. The entries
// are read from the store (they are never all in memory), on the I/O thread, a bounded page at a
// time.

#include <charconv>
#include <cstdint>

#include "api/route_helpers.h"
#include "api/server.h"
#include "common/time_format.h"
#include "control/authz.h"

namespace allot::api {
namespace {

constexpr size_t kDefaultLimit = 100;
constexpr size_t kMaxLimit = 1000;
// One export reply carries at most this many lines; X-Allot-Next-After says where to go on.
constexpr size_t kExportPage = 5000;

nlohmann::json embedded(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? nlohmann::json(text) : j;
}

nlohmann::json auditJson(const model::AuditEntry& e) {
  return {{"id", e.id},
          {"at", formatIso8601(e.at)},
          {"actor", e.actor},
          {"actor_kind", e.actorKind},
          {"address", e.address},
          {"action", e.action},
          {"object", e.object},
          {"status", e.status},
          {"request", embedded(e.request)},
          {"before", embedded(e.before)},
          {"after", embedded(e.after)}};
}

Result<int64_t> readCount(const std::map<std::string, std::string>& query, const char* key,
                          int64_t fallback, int64_t min, int64_t max) {
  auto it = query.find(key);
  if (it == query.end() || it->second.empty()) return fallback;
  int64_t v = 0;
  const std::string& s = it->second;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < min || v > max)
    return Status::InvalidArgument(std::string(key) + ": must be an integer from " +
                                       std::to_string(min) + " to " + std::to_string(max) +
                                       ", got '" + s + "'",
                                   key);
  return v;
}

// The filters both routes share: since, until, actor, object, after.
Result<store::AuditQuery> readFilters(const std::map<std::string, std::string>& query, TimeMs now) {
  store::AuditQuery q;
  for (auto [key, target] : {std::pair{"since", &q.since}, {"until", &q.until}}) {
    auto it = query.find(key);
    if (it == query.end() || it->second.empty()) continue;
    auto t = parseTime(it->second, now);
    if (!t.ok())
      return Status::InvalidArgument(std::string(key) + ": " + t.status().message(), key);
    *target = *t;
  }
  if (q.until != 0 && q.since >= q.until)
    return Status::InvalidArgument("since: must be before until", "since");
  if (auto it = query.find("actor"); it != query.end()) q.actor = it->second;
  if (auto it = query.find("object"); it != query.end()) q.object = it->second;
  auto after = readCount(query, "after", 0, 0, INT64_MAX);
  if (!after.ok()) return after.status();
  q.afterId = *after;
  return q;
}

}  // namespace

void registerAuditRoutes(Router& router, Server& s) {
  using V = http::verb;

  router.add(V::get, "/api/v1/audit", [&s](ApiRequest& r) -> Awaitable {
    if (Status st = control::authz::requireAdmin(r.who(), "read the audit log"); !st.ok())
      co_return ApiResponse::error(st);
    TRY_ASSIGN(q, readFilters(r.query, s.clock().nowMs()));
    TRY_ASSIGN(limit, readCount(r.query, "limit", kDefaultLimit, 1, kMaxLimit));
    TRY_ASSIGN(before, readCount(r.query, "before", 0, 0, INT64_MAX));
    q.limit = static_cast<size_t>(limit);
    q.beforeId = before;
    q.newestFirst = true;
    TRY_ASSIGN(entries, s.store().queryAudit(q));
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : entries) out.push_back(auditJson(e));
    co_return ApiResponse::json(out);
  });

  router.add(V::get, "/api/v1/audit/export", [&s](ApiRequest& r) -> Awaitable {
    if (Status st = control::authz::requireAdmin(r.who(), "export the audit log"); !st.ok())
      co_return ApiResponse::error(st);
    TRY_ASSIGN(q, readFilters(r.query, s.clock().nowMs()));
    q.limit = kExportPage;
    TRY_ASSIGN(entries, s.store().queryAudit(q));
    ApiResponse res;
    res.contentType = "application/x-ndjson";
    for (const auto& e : entries) {
      res.body += auditJson(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      res.body += '\n';
    }
    // A full page may have more behind it; the client asks again with after=<this id>.
    if (entries.size() == kExportPage)
      res.headers.emplace_back("X-Allot-Next-After", std::to_string(entries.back().id));
    co_return res;
  });
}

}  // namespace allot::api
