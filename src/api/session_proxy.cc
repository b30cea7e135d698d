#include <utility>
// <utility> before Asio's coroutine headers (GCC 12).
#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <charconv>
#include <sstream>

#include "api/server.h"
#include "api/session_proxy.h"

namespace allot::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::use_awaitable;
using namespace asio::experimental::awaitable_operators;

namespace {

// The session id in "/sessions/{id}[/...]"; 0 when the path has none.
int64_t sessionIdOf(std::string_view path, bool* bare) {
  std::string_view rest = path.substr(std::string_view("/sessions/").size());
  const size_t end = rest.find('/');
  std::string_view digits = rest.substr(0, end);
  int64_t id = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (ec != std::errc() || p != digits.data() + digits.size() || id <= 0) return 0;
  *bare = end == std::string_view::npos;
  return id;
}

// The request's Origin names this server: its host[:port] is the Host the request was sent to.
bool sameOrigin(const HttpRequest& req) {
  std::string_view origin = req[http::field::origin];
  const size_t scheme = origin.find("://");
  if (scheme == std::string_view::npos) return false;
  return origin.substr(scheme + 3) == req[http::field::host];
}

// Drops allotd's session cookie from a Cookie header, keeping Jupyter's own (_xsrf, ...): the
// session's server is its owner's code, and must never see a console session (perhaps another
// user's, when the session is shared).
std::string withoutOurCookie(std::string_view header) {
  std::string out;
  size_t pos = 0;
  while (pos < header.size()) {
    size_t end = header.find(';', pos);
    if (end == std::string_view::npos) end = header.size();
    std::string_view part = header.substr(pos, end - pos);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    if (!part.empty() && part.substr(0, part.find('=')) != kSessionCookie)
      out += (out.empty() ? "" : "; ") + std::string(part);
    pos = end + 1;
  }
  return out;
}

template <typename Stream>
asio::awaitable<bool> reply(Stream& stream, const HttpRequest& req, const ApiResponse& res) {
  http::response<http::string_body> out{res.status, req.version()};
  out.set(http::field::server, "allotd");
  out.set(http::field::content_type, res.contentType);
  for (const auto& [k, v] : res.headers) out.set(k, v);
  out.keep_alive(req.keep_alive());
  out.body() = res.body;
  out.prepare_payload();
  auto [ec, n] = co_await http::async_write(stream, out, asio::as_tuple(use_awaitable));
  co_return !ec && out.keep_alive();
}

// After a 101: bytes both ways until both sides are done. The client closing ends Jupyter's
// side (CLOSE); Jupyter closing ends the client's connection.
template <typename Stream>
asio::awaitable<void> relayUpgraded(Stream& client, beast::flat_buffer& buffer,
                                    std::shared_ptr<tunnel::TunnelStream> t) {
  auto upstream = [&]() -> asio::awaitable<void> {
    if (buffer.size() > 0) {
      std::string early = beast::buffers_to_string(buffer.data());
      buffer.consume(buffer.size());
      Status st = co_await t->write(std::move(early));
      if (!st.ok()) co_return;
    }
    std::string chunk(64 * 1024, '\0');
    for (;;) {
      auto [ec, n] =
          co_await client.async_read_some(asio::buffer(chunk), asio::as_tuple(use_awaitable));
      if (ec || n == 0) break;
      std::string piece = chunk.substr(0, n);
      Status st = co_await t->write(std::move(piece));
      if (!st.ok()) co_return;
    }
    t->closeWrite();
  };
  auto downstream = [&]() -> asio::awaitable<void> {
    for (;;) {
      auto data = co_await t->read();
      if (!data.ok() || data->empty()) break;
      auto [ec, n] =
          co_await asio::async_write(client, asio::buffer(*data), asio::as_tuple(use_awaitable));
      if (ec) break;
    }
    beast::error_code ignored;
    beast::get_lowest_layer(client).socket().shutdown(asio::socket_base::shutdown_both, ignored);
  };
  auto both = upstream() && downstream();
  co_await std::move(both);
}

}  // namespace

bool isSessionPath(std::string_view target) { return target.rfind("/sessions/", 0) == 0; }

template <typename Stream>
asio::awaitable<bool> serveSession(Server& server, Stream& stream, beast::flat_buffer& buffer,
                                   HttpRequest req, SessionProxyState& state) {
  std::string_view target = req.target();
  const std::string path(target.substr(0, target.find('?')));
  bool bare = false;
  const int64_t id = sessionIdOf(path, &bare);
  if (id == 0) {
    auto res = ApiResponse::error(Status::NotFound("no such endpoint: " + path));
    co_return co_await reply(stream, req, res);
  }

  std::string expired;
  auto cred = server.login().authenticate(req, server.cluster(), &expired, /*csrfToken=*/false);
  if (!expired.empty()) {
    // An idle console session ends for good, as on the API's paths.
    if (auto ended = server.cluster().endSession(expired); ended.ok())
      co_await server.apply(*ended);
  }
  if (!cred.principal) {
    auto res = ApiResponse::error(cred.error);
    co_return co_await reply(stream, req, res);
  }
  if (bare) {
    // Jupyter's pages are relative to the base URL, which ends in a slash.
    ApiResponse res{http::status::moved_permanently, "", "text/plain", {}};
    res.headers.emplace_back("Location", path + "/");
    co_return co_await reply(stream, req, res);
  }
  const bool upgrade = beast::websocket::is_upgrade(req);
  const bool safe = req.method() == http::verb::get || req.method() == http::verb::head ||
                    req.method() == http::verb::options;
  if (cred.viaCookie && (upgrade || !safe) && !sameOrigin(req)) {
    auto res = ApiResponse::error(Status::PermissionDenied(
        "a request to a session with the console's cookie must come from the console's origin"));
    co_return co_await reply(stream, req, res);
  }
  auto endpoint = server.cluster().openSession(*cred.principal, id);
  if (!endpoint.ok()) {
    auto res = ApiResponse::error(endpoint.status());
    if (endpoint.status().code() == Code::kUnavailable)
      res.headers.emplace_back("Retry-After", "1");
    co_return co_await reply(stream, req, res);
  }
  if (endpoint->app.rfind("jupyter", 0) != 0) {
    auto res = ApiResponse::error(Status::FailedPrecondition(
        "session " + std::to_string(id) + " runs no Jupyter; connect with allot ssh"));
    co_return co_await reply(stream, req, res);
  }

  // The request as Jupyter gets it: its token instead of ours, a local Host (a loopback server
  // refuses others), no Origin (checked above; Jupyter would compare it with that Host).
  req.erase(http::field::authorization);
  req.set(http::field::authorization, "token " + endpoint->token);
  if (auto cookies = withoutOurCookie(req[http::field::cookie]); cookies.empty())
    req.erase(http::field::cookie);
  else
    req.set(http::field::cookie, cookies);
  req.erase("X-CSRF-Token");
  req.erase(http::field::origin);
  req.set(http::field::host, "localhost");
  beast::error_code peerError;
  const auto peer = beast::get_lowest_layer(stream).socket().remote_endpoint(peerError);
  if (!peerError) req.set("X-Forwarded-For", peer.address().to_string());
  if (!upgrade) req.prepare_payload();
  std::ostringstream wire;
  wire << req;

  if (state.stream && (state.session != id || state.stream->finished())) {
    state.stream->reset("connection moved on");
    state.stream.reset();
  }
  if (!state.stream) {
    const std::string targetName = "jupyter";
    auto opened = co_await server.tunnels().open(endpoint->host, id, targetName);
    if (!opened.ok()) {
      auto res = ApiResponse::error(
          Status::Unavailable("session " + std::to_string(id) + ": " + opened.status().message()));
      co_return co_await reply(stream, req, res);
    }
    state.session = id;
    state.stream = *opened;
  }
  auto t = state.stream;
  server.cluster().sessionProxied(id);
  std::string bytes = wire.str();
  Status sent = co_await t->write(std::move(bytes));
  if (!sent.ok()) {
    state.stream.reset();
    auto res = ApiResponse::error(
        Status::Unavailable("session " + std::to_string(id) + ": " + sent.message()));
    co_return co_await reply(stream, req, res);
  }

  // Jupyter's answer goes back byte for byte; a parser only finds where it ends.
  http::response_parser<http::dynamic_body> parser;
  parser.body_limit(boost::none);
  parser.eager(true);
  if (req.method() == http::verb::head) parser.skip(true);
  std::string pending;
  bool started = false;
  for (;;) {
    auto data = co_await t->read();
    if (!data.ok() || data->empty()) {
      state.stream.reset();
      if (!started) {
        auto res = ApiResponse::error(Status::Unavailable("session " + std::to_string(id) +
                                                          ": Jupyter closed the connection"));
        co_return co_await reply(stream, req, res);
      }
      beast::error_code ec;
      parser.put_eof(ec);
      co_return false;  // a response that ends with the connection ends ours too
    }
    started = true;
    auto [wec, wn] =
        co_await asio::async_write(stream, asio::buffer(*data), asio::as_tuple(use_awaitable));
    if (wec) {
      state.stream.reset();
      co_return false;
    }
    pending += *data;
    beast::error_code ec;
    while (!pending.empty() && !parser.is_done()) {
      const size_t used = parser.put(asio::buffer(pending), ec);
      pending.erase(0, used);
      parser.get().body().consume(parser.get().body().size());
      if (ec == http::error::need_more) {
        ec = {};
        break;
      }
      if (ec) break;
      if (parser.is_header_done() && parser.get().result() == http::status::switching_protocols)
        break;
    }
    if (ec) {
      spdlog::warn("session {}: cannot follow Jupyter's response: {}", id, ec.message());
      state.stream.reset();
      co_return false;
    }
    if (parser.is_header_done() && parser.get().result() == http::status::switching_protocols) {
      if (!upgrade) {
        state.stream.reset();
        co_return false;
      }
      // From here the connection is a WebSocket between the browser and Jupyter.
      beast::get_lowest_layer(stream).expires_never();
      // Jupyter's first frames, if they came with its 101, were written with it above.
      state.stream.reset();
      server.cluster().sessionRelay(id, true);
      co_await relayUpgraded(stream, buffer, t);
      server.cluster().sessionRelay(id, false);
      co_return false;
    }
    if (parser.is_done()) co_return parser.get().keep_alive() && req.keep_alive();
  }
}

bool isSessionSshPath(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  constexpr std::string_view prefix = "/api/v1/sessions/", suffix = "/ssh";
  if (path.size() <= prefix.size() + suffix.size() || path.rfind(prefix, 0) != 0 ||
      path.substr(path.size() - suffix.size()) != suffix)
    return false;
  std::string_view id = path.substr(prefix.size(), path.size() - prefix.size() - suffix.size());
  return id.find('/') == std::string_view::npos;
}

template <typename Stream>
asio::awaitable<void> serveSsh(Server& server, Stream& stream, beast::flat_buffer& buffer,
                               HttpRequest req) {
  std::string_view target = req.target();
  std::string_view path = target.substr(0, target.find('?'));
  std::string_view digits = path.substr(std::string_view("/api/v1/sessions/").size());
  digits.remove_suffix(std::string_view("/ssh").size());
  int64_t id = 0;
  auto [p, perr] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (perr != std::errc() || p != digits.data() + digits.size() || id <= 0) {
    co_await reply(stream, req,
                   ApiResponse::error(Status::InvalidArgument(
                       "'" + std::string(digits) + "' is not a session id", "id")));
    co_return;
  }
  std::string expired;
  auto cred = server.login().authenticate(req, server.cluster(), &expired, /*csrfToken=*/false);
  if (!cred.principal) {
    co_await reply(stream, req, ApiResponse::error(cred.error));
    co_return;
  }
  const bool upgrade = req.method() == http::verb::get &&
                       beast::iequals(req[http::field::upgrade], "tcp") &&
                       beast::http::token_list(req[http::field::connection]).exists("upgrade");
  if (!upgrade) {
    co_await reply(stream, req,
                   ApiResponse::error(Status::InvalidArgument(
                       "this endpoint carries an SSH connection: GET with "
                       "'Connection: Upgrade' and 'Upgrade: tcp' (allot ssh --stdio does)",
                       "upgrade")));
    co_return;
  }
  if (cred.viaCookie && !sameOrigin(req)) {
    co_await reply(stream, req,
                   ApiResponse::error(Status::PermissionDenied(
                       "an SSH connection with the console's cookie must come from its origin")));
    co_return;
  }
  auto endpoint = server.cluster().openSessionSsh(*cred.principal, id);
  if (!endpoint.ok()) {
    co_await reply(stream, req, ApiResponse::error(endpoint.status()));
    co_return;
  }
  const std::string targetName = "ssh";
  auto opened = co_await server.tunnels().open(endpoint->host, id, targetName);
  if (!opened.ok()) {
    co_await reply(stream, req,
                   ApiResponse::error(Status::Unavailable("session " + std::to_string(id) + ": " +
                                                          opened.status().message())));
    co_return;
  }
  http::response<http::empty_body> res{http::status::switching_protocols, req.version()};
  res.set(http::field::server, "allotd");
  res.set(http::field::connection, "Upgrade");
  res.set(http::field::upgrade, "tcp");
  auto [ec, n] = co_await http::async_write(stream, res, asio::as_tuple(use_awaitable));
  if (ec) {
    (*opened)->reset("client went away");
    co_return;
  }
  spdlog::info("session ssh: session={} user={} host={}", id, cred.principal->name, endpoint->host);
  beast::get_lowest_layer(stream).expires_never();
  // An open SSH connection is use: the session is not idle while it lasts.
  server.cluster().sessionRelay(id, true);
  co_await relayUpgraded(stream, buffer, *opened);
  server.cluster().sessionRelay(id, false);
}

asio::awaitable<void> serveSessionSsh(Server& server, beast::tcp_stream& stream,
                                      beast::flat_buffer& buffer, HttpRequest req) {
  co_await serveSsh(server, stream, buffer, std::move(req));
}

asio::awaitable<void> serveSessionSsh(Server& server, beast::ssl_stream<beast::tcp_stream>& stream,
                                      beast::flat_buffer& buffer, HttpRequest req) {
  co_await serveSsh(server, stream, buffer, std::move(req));
}

asio::awaitable<bool> serveSessionRequest(Server& server, beast::tcp_stream& stream,
                                          beast::flat_buffer& buffer, HttpRequest req,
                                          SessionProxyState& state) {
  co_return co_await serveSession(server, stream, buffer, std::move(req), state);
}

asio::awaitable<bool> serveSessionRequest(Server& server,
                                          beast::ssl_stream<beast::tcp_stream>& stream,
                                          beast::flat_buffer& buffer, HttpRequest req,
                                          SessionProxyState& state) {
  co_return co_await serveSession(server, stream, buffer, std::move(req), state);
}

}  // namespace allot::api
