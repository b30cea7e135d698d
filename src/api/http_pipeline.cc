#include "api/http_pipeline.h"

#include <boost/beast/websocket/rfc6455.hpp>
#include <chrono>
#include <string_view>

#include "api/server.h"
#include "api/session_proxy.h"
#include "common/gzip.h"
#include "common/utf8.h"

namespace allot::api {

namespace {

// API answers at least this big go gzipped to clients that accept it (browsers do; the CLI and
// agents do not ask): a 1,000-host cluster map is 1.69 MB of JSON and 78 KB as sent, at zlib's
// fastest level, which keeps the I/O thread's cost low (docs/benchmarks.md).
constexpr size_t kGzipMinBytes = 8 * 1024;

bool shouldGzip(const HttpRequest& req, const ApiResponse& res,
                const http::response<http::string_body>& out) {
  if (res.body.size() < kGzipMinBytes || out.count(http::field::content_encoding)) return false;
  const std::string_view type = res.contentType;
  const bool text = type.starts_with("application/json") || type.starts_with("text/");
  return text && acceptsGzip(req[http::field::accept_encoding]);
}

// The route stage's answer when no route serves the request: a console file, 404 or 405.
ApiResponse answerWithoutRoute(Server& server, const HttpRequest& req, std::string_view path,
                               bool pathKnown, bool onSessionOrigin, bool console) {
  if (onSessionOrigin)
    return ApiResponse::error(
        Status::NotFound("no such endpoint on a session's origin: " + std::string(path)));
  if (console) return server.console().serve(path, req[http::field::accept_encoding]);
  if (!pathKnown)
    return ApiResponse::error(Status::NotFound("no such endpoint: " + std::string(path)));
  ApiResponse res = ApiResponse::error(Status::InvalidArgument(
      std::string(req.method_string()) + " is not allowed on " + std::string(path)));
  res.status = http::status::method_not_allowed;
  return res;
}

// The authenticate stage: sets areq's principal, or returns the refusal to send (`path` names
// the endpoint in it). For an event stream, streamCred keeps the credential the stream
// re-checks at every keepalive.
boost::asio::awaitable<std::optional<ApiResponse>> authenticate(Server& server, const Route& route,
                                                                std::string_view path,
                                                                ApiRequest& areq,
                                                                StreamCredential& streamCred) {
  std::string idleSession;
  auto cred = server.login().authenticate(areq.raw, server.cluster(), &idleSession);
  if (!idleSession.empty()) {
    // An idle console session ends for good, not just until allotd restarts.
    if (auto ended = server.cluster().access().endSession(idleSession); ended.ok())
      co_await server.apply(*ended);
  }
  areq.principal = std::move(cred.principal);
  areq.credentialId = std::move(cred.tokenId);
  areq.viaCookie = cred.viaCookie;
  if (route.eventStream) streamCred = {cred.secret, cred.viaCookie};
  if (!areq.principal) co_return ApiResponse::error(cred.error);
  if (areq.principal->kind == control::Principal::Kind::kHost) {
    // Host credentials speak only the agent protocol.
    co_return ApiResponse::error(
        Status::PermissionDenied("a host credential cannot call " + std::string(path)));
  }
  co_return std::nullopt;
}

}  // namespace

RequestOwner dispatch(const HttpRequest& req, bool onSessionOrigin) {
  if (isSessionPath(req.target())) return RequestOwner::kSessionProxy;
  // A session's origin serves that session and nothing else: not the API, whose CSRF token a
  // session's scripts must never read, nor the console, nor an agent's stream.
  if (onSessionOrigin) return RequestOwner::kApi;  // which answers 404
  if (isSessionSshPath(req.target())) return RequestOwner::kSessionSsh;
  if (boost::beast::websocket::is_upgrade(req)) return RequestOwner::kAgentStream;
  return RequestOwner::kApi;
}

boost::asio::awaitable<ApiOutcome> serveApi(Server& server, const HttpRequest& req,
                                            bool onSessionOrigin, const std::string& peerAddress) {
  const auto started = std::chrono::steady_clock::now();
  std::string_view target = req.target();
  const auto qpos = target.find('?');
  std::string_view path = target.substr(0, qpos);
  auto match = server.router().match(req.method(), path);
  const bool console =
      !onSessionOrigin && !match.route && StaticFiles::isConsoleRequest(req.method(), path);
  ApiOutcome outcome;
  if (onSessionOrigin || !match.route) {
    outcome.response =
        answerWithoutRoute(server, req, path, match.pathKnown, onSessionOrigin, console);
  } else {
    const Route& route = *match.route;
    ApiRequest areq{.raw = req, .params = std::move(match.params), .peer = peerAddress};
    if (qpos != std::string_view::npos) areq.query = parseQuery(target.substr(qpos + 1));
    std::optional<ApiResponse> refused;
    // Percent-decoding can make any bytes; what is not UTF-8 can be neither stored nor shown.
    if (auto bad = nonUtf8Parameter(areq); !bad.empty())
      refused = ApiResponse::error(Status::InvalidArgument(bad + ": not valid UTF-8", bad));
    StreamCredential streamCred;
    if (!refused && route.authenticated) {
      std::optional<ApiResponse> authRefused =
          co_await authenticate(server, route, path, areq, streamCred);
      refused = std::move(authRefused);
    }
    if (!refused && route.eventStream) {
      // Not audited (a read), not a response: the connection is the stream's until it ends.
      server.metrics().request(route.pattern, std::string(req.method_string()), 200, 0);
      outcome.eventStream = std::move(streamCred);
      co_return outcome;
    }
    if (refused) {
      outcome.response = std::move(*refused);
    } else {
      ApiResponse handled = co_await server.runHandler(route, areq, path, peerAddress);
      outcome.response = std::move(handled);
    }
  }
  server.metrics().request(
      match.route ? match.route->pattern : std::string(console ? "(console)" : "(unmatched)"),
      std::string(req.method_string()), static_cast<int>(outcome.response.status),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  co_return outcome;
}

http::response<http::string_body> encodeResponse(const HttpRequest& req, ApiResponse res) {
  http::response<http::string_body> out{res.status, req.version()};
  out.set(http::field::server, "allotd");
  out.set(http::field::content_type, res.contentType);
  for (auto& [k, v] : res.headers) out.set(k, v);
  out.keep_alive(req.keep_alive());
  if (shouldGzip(req, res, out)) {
    res.body = gzipCompress(res.body);
    out.set(http::field::content_encoding, "gzip");
    out.set(http::field::vary, "Accept-Encoding");
  }
  out.body() = std::move(res.body);
  out.prepare_payload();
  if (req.method() == http::verb::head) {
    // The length of what GET would send, and no body.
    const auto length = out.body().size();
    out.body().clear();
    out.content_length(length);
  }
  return out;
}

std::string responseHead(const http::response_header<>& out) {
  const auto reason = out.reason();
  size_t size = 32 + reason.size();
  for (const auto& f : out) size += f.name_string().size() + f.value().size() + 4;
  std::string head;
  head.reserve(size);
  head += "HTTP/";
  head += static_cast<char>('0' + out.version() / 10 % 10);
  head += '.';
  head += static_cast<char>('0' + out.version() % 10);
  head += ' ';
  head += std::to_string(out.result_int());
  head += ' ';
  head.append(reason.data(), reason.size());
  head += "\r\n";
  for (const auto& f : out) {
    head.append(f.name_string().data(), f.name_string().size());
    head += ": ";
    head.append(f.value().data(), f.value().size());
    head += "\r\n";
  }
  head += "\r\n";
  return head;
}

http::response<http::string_body> encodeTooLarge(size_t limit) {
  return encodeUnreadable(
      Status::TooLarge("body: larger than " + std::to_string(limit) + " bytes", "body"));
}

http::response<http::string_body> encodeUnreadable(const Status& why) {
  auto res = ApiResponse::error(why);
  http::response<http::string_body> out{res.status, 11};
  out.set(http::field::content_type, res.contentType);
  out.keep_alive(false);
  out.body() = std::move(res.body);
  out.prepare_payload();
  return out;
}

std::string nonUtf8Parameter(const ApiRequest& req) {
  for (const auto& [k, v] : req.params) {
    if (!isValidUtf8(v)) return k;
  }
  for (const auto& [k, v] : req.query) {
    if (!isValidUtf8(k)) return "query";
    if (!isValidUtf8(v)) return k;
  }
  return "";
}

}  // namespace allot::api
