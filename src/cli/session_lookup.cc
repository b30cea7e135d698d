#include "cli/session_lookup.h"

#include <charconv>

namespace allot::cli {

Result<int64_t> findSession(ApiClient& api, const std::string& idOrName) {
  int64_t id = 0;
  auto [p, ec] = std::from_chars(idOrName.data(), idOrName.data() + idOrName.size(), id);
  if (ec == std::errc() && p == idOrName.data() + idOrName.size() && id > 0) return id;
  if (idOrName.empty()) return Status::InvalidArgument("a session id or name is required");
  // Names are unique among the caller's live sessions (and those shared with them).
  auto sessions = api.get("/sessions");
  if (!sessions.ok()) return sessions.status();
  for (const auto& s : *sessions) {
    if (s.value("name", "") == idOrName) return s.value("id", int64_t{0});
  }
  return Status::NotFound("no live session named '" + idOrName + "'");
}

Result<int64_t> findSession(Context& ctx, const std::string& idOrName) {
  auto api = ctx.api();
  if (!api.ok()) return api.status();
  return findSession(**api, idOrName);
}

}  // namespace allot::cli
