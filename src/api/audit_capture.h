#pragma once
// Audit capture: turns every successful write through the API into one model::AuditEntry
// (docs/audit.md). Server::session runs it around every handler of a non-GET route, so no route
// can forget it: begin() before the handler reads the resource as it was, finish() after it
// builds the entry from the reply (nothing for a reply that is not 2xx). The session commits the
// entry in the same batch as the handler's change (RequestWrite, server.h), before it replies.
// On allotd's I/O thread only.
//
// before and after are the resource as the API itself shows it: the nearest GET route on the
// request's path ("/hosts/gpu-01/drain" -> GET "/hosts/gpu-01"), called internally as a platform
// admin (authz::auditReader). A route with no such GET (a creation: "POST /teams") has before
// null and after the reply. Secrets are redacted everywhere (redact).

#include <boost/asio/awaitable.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/redact.h"
#include "api/router.h"
#include "model/audit.h"

namespace allot::api {

// What a route acts on: "kind:value" for each path parameter, the kind from the segment before
// it, joined by '/' ("/teams/{team}/projects/{project}/quota" -> "team:ml/project:vision"). For
// a route without parameters (a creation), the created object from the reply: its "id" or
// "name" under the kind the path ends with ("POST /jobs" -> "job:42"), or an object the reply
// holds under a kind ({"host":{"name":"gpu-02"}} -> "host:gpu-02"). "" when nothing names it.
std::string auditObjectOf(const std::string& pattern,
                          const std::map<std::string, std::string>& params,
                          const nlohmann::json& reply);

// The path of the GET route that shows what a request to `path` (matched by `pattern`) changes:
// the longest prefix of `path`, keeping at least its first parameter, that a GET route serves.
// nullopt for a route without parameters, or when no GET serves such a prefix.
std::optional<std::string> auditSnapshotPath(const Router& router, std::string_view path,
                                             const std::string& pattern);

class AuditCapture {
 public:
  // Whether requests to `route` are audited: every method that may change something.
  static bool audited(const Route& route);

  // Before the handler runs: who, from where, and the resource as it is now.
  static boost::asio::awaitable<AuditCapture> begin(const Router& router, const Route& route,
                                                    const ApiRequest& req, std::string_view path,
                                                    std::string address, TimeMs now);

  // After it: the entry for a 2xx reply, with the resource as it is now; nullopt otherwise.
  boost::asio::awaitable<std::optional<model::AuditEntry>> finish(const Router& router,
                                                                  const ApiResponse& reply);

 private:
  model::AuditEntry entry_;
  std::string pattern_;
  std::map<std::string, std::string> params_;
  std::optional<std::string> snapshotPath_;
  const std::string* body_ = nullptr;  // the request's, which outlives the capture
  const bool* bodyIsJson_ = nullptr;   // the request's ApiRequest::bodyIsJson, set by its handler
};

}  // namespace allot::api
