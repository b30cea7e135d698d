#pragma once
// What a route handler sees and returns. Handlers are coroutines on allotd's I/O thread.

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "control/principal.h"

namespace allot::api {

struct RequestWrite;  // server.h

namespace http = boost::beast::http;
using HttpRequest = http::request<http::string_body>;

struct ApiRequest {
  const HttpRequest& raw;
  std::map<std::string, std::string> params = {};  // from the path pattern: {id} -> "42"
  std::map<std::string, std::string> query = {};
  std::optional<control::Principal> principal = {};  // set on every authenticated route
  std::string peer = {};          // the client's IP address (the socket's; proxies are not trusted)
  std::string credentialId = {};  // the id of the token that authenticated it (for logout)
  bool viaCookie = false;         // authenticated by a console session cookie
  // Set for an audited request: the one write its handler's changes and its audit entry make,
  // committed once the handler has returned (Server::apply). Null otherwise.
  RequestWrite* write = nullptr;
  // Set by readBody once the body parsed as JSON within kMaxJsonDepth: the audit entry then
  // keeps it as sent without checking it again.
  bool bodyIsJson = false;
  const control::Principal& who() const { return *principal; }
};

struct ApiResponse {
  http::status status = http::status::ok;
  std::string body{};
  std::string contentType = "application/json";
  std::vector<std::pair<std::string, std::string>> headers{};
  // Run once the request's write is durable, just before the reply goes out, to show the state
  // then: a submission's reply has the job as the scheduling pass, which ran meanwhile, left it
  // (placed, or with its real wait reason). The audit entry keeps the reply as first built.
  std::function<void(ApiResponse&)> refreshAfterWrite = nullptr;
  // The body as JSON, when it was built from a temporary: the audit entry of a write reads the
  // reply from here instead of parsing the body back (audit_capture.cc).
  // A refresh may edit it in place once the audit has let go of it.
  std::shared_ptr<nlohmann::json> value = nullptr;
  // Set when the body is JSON text written directly, not from a value (job_text.h): the id of the
  // object it shows, which names the audit entry's object, so that the audit need not parse the
  // body back. Such a body is as ApiResponse::dumpBody would have written it.
  std::optional<int64_t> shownId = std::nullopt;

  static ApiResponse json(const nlohmann::json& j, http::status s = http::status::ok) {
    return ApiResponse{s, dumpBody(j), "application/json", {}};
  }
  static ApiResponse json(nlohmann::json&& j, http::status s = http::status::ok) {
    ApiResponse res{s, {}, "application/json", {}};
    res.setJson(std::move(j));
    return res;
  }
  // Replaces the body (and value) with `j`'s, keeping status and headers.
  void setJson(nlohmann::json j) {
    auto kept = std::make_shared<nlohmann::json>(std::move(j));
    body = dumpBody(*kept);
    value = std::move(kept);
  }
  // Replace, not throw: text from hosts (hook output cut at a byte limit) may split a UTF-8
  // character, and one bad byte must not cost the whole reply.
  static std::string dumpBody(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  static ApiResponse error(const Status& st);
};

using Handler = std::function<boost::asio::awaitable<ApiResponse>(ApiRequest&)>;

// Maps a Status code to its HTTP status; the only place that does.
http::status httpStatusOf(Code code);

}  // namespace allot::api
