#include <utility>
// <utility> before Asio's coroutine headers (GCC 12).
#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <charconv>
#include <functional>
#include <sstream>

#include "api/router.h"
#include "api/server.h"
#include "api/session_origin.h"
#include "api/session_proxy.h"
#include "common/ascii.h"

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

// Drops allotd's cookies (the console's, a session origin's) from a Cookie header, keeping
// Jupyter's own (_xsrf, ...): the session's server is its owner's code, and must never see a
// credential of anyone's (perhaps another user's, when the session is shared).
std::string withoutOurCookie(std::string_view header) {
  std::string out;
  size_t pos = 0;
  while (pos < header.size()) {
    size_t end = header.find(';', pos);
    if (end == std::string_view::npos) end = header.size();
    std::string_view part = header.substr(pos, end - pos);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    const std::string_view name = part.substr(0, part.find('='));
    if (!part.empty() && name != kSessionCookie && name != kOriginCookie)
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

// How often an open relay checks that its caller may still reach the session.
constexpr auto kRelayRecheck = std::chrono::seconds(2);

// After a 101: bytes both ways until both sides are done. The client closing ends Jupyter's
// side (CLOSE); Jupyter closing ends the client's connection. Every kRelayRecheck it asks
// stillAllowed(), and ends both sides once the answer is no: a WebSocket or SSH connection lasts
// no longer than the access it was opened with (a token revoked, a logout, a share or a team
// membership ended, the session stopped).
template <typename Stream>
asio::awaitable<void> relayUpgraded(Stream& client, beast::flat_buffer& buffer,
                                    std::shared_ptr<tunnel::TunnelStream> t,
                                    std::function<bool()> stillAllowed) {
  asio::steady_timer recheck(co_await asio::this_coro::executor);
  int relaying = 2;  // directions still open
  struct Done {
    int& relaying;
    asio::steady_timer& recheck;
    ~Done() {
      if (--relaying == 0) recheck.cancel();
    }
  };
  auto upstream = [&]() -> asio::awaitable<void> {
    Done done{relaying, recheck};
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
    Done done{relaying, recheck};
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
  auto watchdog = [&]() -> asio::awaitable<void> {
    while (relaying > 0) {
      recheck.expires_after(kRelayRecheck);
      co_await recheck.async_wait(asio::as_tuple(use_awaitable));
      if (relaying == 0 || stillAllowed()) continue;
      // Both directions end on their own once their ends are gone.
      t->reset("access to the session ended");
      beast::error_code ignored;
      beast::get_lowest_layer(client).socket().shutdown(asio::socket_base::shutdown_both, ignored);
      break;
    }
  };
  auto all = upstream() && downstream() && watchdog();
  co_await std::move(all);
}

// Whether the caller of a relay may still reach session id: its credential still authenticates
// (not revoked, expired, logged out or idle) and, as it is now, opens the session (ssh: as its
// owner).
std::function<bool()> accessCheck(Server& server, const RequestCredential& cred, int64_t id,
                                  bool ssh) {
  return [&server, secret = cred.secret, viaCookie = cred.viaCookie, id, ssh] {
    if (!server.login().stillValid(secret, viaCookie, server.cluster())) return false;
    auto p = server.cluster().access().authenticate(secret);
    if (!p) return false;
    return ssh ? server.cluster().sessions().openSsh(*p, id).ok()
               : server.cluster().sessions().open(*p, id).ok();
  };
}

// The console session that the cookie of session id's own origin stands for. A page of another
// session's origin can add a cookie of that name for this one (its Domain and Path are the page's
// to choose), which the browser sends beside ours: one that stands for nothing here is passed
// over, where refusing both would shut the user out of the session. Two that stand for different
// console sessions are refused: which one the user meant is not ours to guess.
std::optional<std::string> originConsoleSecret(Server& server, std::string_view cookies,
                                               int64_t id) {
  std::optional<std::string> found;
  for (std::string_view value : cookieValues(cookies, kOriginCookie)) {
    auto secret = server.sessionAccess().consoleSecretOf(value, id, server.clock().nowMs());
    if (!secret) continue;
    if (found && *found != *secret) return std::nullopt;
    found = std::move(secret);
  }
  return found;
}

// The handoff's landing on session id's own origin: a valid ticket becomes this origin's cookie,
// and the browser goes on to where it was going (within the session; anywhere else is the
// session's start page).
ApiResponse redeemHandoff(Server& server, const HttpRequest& req, int64_t id) {
  const std::string base = "/sessions/" + std::to_string(id) + "/";
  std::string_view target = req.target();
  const size_t q = target.find('?');
  auto query = parseQuery(q == std::string_view::npos ? "" : target.substr(q + 1));
  auto credential = server.sessionAccess().redeem(query["ticket"], id, server.clock().nowMs(),
                                                  server.login().sessionLifetimeMs());
  if (!credential) {
    return ApiResponse::error(Status::Unauthenticated(
        "this link to session " + std::to_string(id) +
        " has expired or was used already; open the session again from the console"));
  }
  std::string next = query["next"];
  if (next.rfind(base, 0) != 0 || next.find_first_of("\r\n\\") != std::string::npos ||
      next.substr(0, next.find('?')).find(std::string(kHandoffPath)) != std::string::npos)
    next = base;
  ApiResponse res{http::status::found, "", "text/plain", {}};
  res.headers.emplace_back("Set-Cookie", server.login().sessionOriginCookie(*credential, id));
  res.headers.emplace_back("Location", next);
  res.headers.emplace_back("Cache-Control", "no-store");
  res.headers.emplace_back("Referrer-Policy", "no-referrer");
  return res;
}

// A browser opening a session link with no login (a bookmark, a link pasted into a new
// browser): it goes to the console's login page, which brings it back here once logged in,
// instead of being shown a JSON error. Only for page loads without a token: scripts and the
// CLI, which send one, and Jupyter's own requests keep the JSON answer.
std::optional<ApiResponse> loginRedirect(Server& server, const HttpRequest& req, bool ownOrigin) {
  const bool navigation = req["Sec-Fetch-Mode"] == "navigate" ||
                          req[http::field::accept].find("text/html") != std::string_view::npos;
  if (req.method() != http::verb::get || !navigation || req.count(http::field::authorization))
    return std::nullopt;
  const std::string target(req.target());
  if (target.find_first_of("\r\n") != std::string::npos) return std::nullopt;
  std::string console;  // "": the console is this origin
  if (ownOrigin) {
    auto known = consoleOrigin(server.sessionOrigins(), req[http::field::host]);
    if (!known) return std::nullopt;
    console = *known;
  }
  ApiResponse res{http::status::found, "", "text/plain", {}};
  res.headers.emplace_back(
      "Location", console + "/?next=" + boost::urls::encode(target, boost::urls::unreserved_chars));
  res.headers.emplace_back("Cache-Control", "no-store");
  return res;
}

}  // namespace

bool isSessionPath(std::string_view target) { return target.rfind("/sessions/", 0) == 0; }

std::optional<std::string> sessionCaller(Server& server, const HttpRequest& header) {
  std::string secret = bearerTokenOf(header);
  if (secret.empty()) {
    const int64_t host = sessionOfHost(header[http::field::host], server.sessionOrigins().domain);
    secret = host != 0 ? originConsoleSecret(server, header[http::field::cookie], host).value_or("")
                       : sessionSecretOf(header);
  }
  // The token is checked, and that it may open the session, not how it is presented nor a
  // console session's idle clock: the request itself checks those once it is read. Anyone else
  // is held to the API's body limit, so a valid token alone does not make allotd buffer 256 MiB.
  auto p = secret.empty() ? std::nullopt : server.cluster().access().authenticate(secret);
  if (!p || p->kind == control::Principal::Kind::kHost) return std::nullopt;
  const std::string_view target = header.target();
  bool bare = false;
  const int64_t id = sessionIdOf(target.substr(0, target.find('?')), &bare);
  if (id == 0 || !server.cluster().sessions().open(*p, id).ok()) return std::nullopt;
  return p->name;
}

template <typename Stream>
asio::awaitable<bool> serveSession(Server& server, Stream& stream, beast::flat_buffer& buffer,
                                   HttpRequest req, SessionProxyState& state) {
  const std::string targetText(req.target());
  const std::string path(targetText.substr(0, targetText.find('?')));
  bool bare = false;
  const int64_t id = sessionIdOf(path, &bare);
  if (id == 0) {
    auto res = ApiResponse::error(Status::NotFound("no such endpoint: " + path));
    co_return co_await reply(stream, req, res);
  }

  // Session `id`'s own origin, or the console's (api/session_origin.h). A session's origin
  // serves no other session.
  const int64_t hostSession = sessionOfHost(req[http::field::host], server.sessionOrigins().domain);
  if (hostSession != 0 && hostSession != id) {
    auto res = ApiResponse::error(Status::NotFound("no such endpoint on this session's origin"));
    co_return co_await reply(stream, req, res);
  }
  const bool ownOrigin = hostSession == id;
  const std::string base = "/sessions/" + std::to_string(id) + "/";
  if (ownOrigin && path == base + std::string(kHandoffPath))
    co_return co_await reply(stream, req, redeemHandoff(server, req, id));

  // A service worker, once registered, would see every later request of the origin, the
  // handoff's ticket among them: a session's pages may not install one.
  if (req.count("Service-Worker") > 0) {
    auto res = ApiResponse::error(
        Status::PermissionDenied("service workers are not allowed in a session"));
    co_return co_await reply(stream, req, res);
  }

  // At the session's own origin its cookie stands for the console session behind it; nothing
  // else there counts as a cookie of ours (one a sibling session's page tossed in, say).
  const std::string cookies(req[http::field::cookie]);
  if (ownOrigin) {
    auto console = originConsoleSecret(server, cookies, id);
    if (console)
      req.set(http::field::cookie, std::string(kSessionCookie) + "=" + *console);
    else
      req.erase(http::field::cookie);
  }
  std::string expired;
  auto cred = server.login().authenticate(req, server.cluster(), &expired, /*csrfToken=*/false);
  if (cookies.empty())
    req.erase(http::field::cookie);
  else
    req.set(http::field::cookie, cookies);
  if (!expired.empty()) {
    // An idle console session ends for good, as on the API's paths.
    if (auto ended = server.cluster().access().endSession(expired); ended.ok())
      co_await server.apply(*ended);
  }
  if (!cred.principal) {
    auto res = loginRedirect(server, req, ownOrigin).value_or(ApiResponse::error(cred.error));
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
  if (cred.viaCookie && !ownOrigin && (upgrade || !safe)) {
    auto res = ApiResponse::error(Status::PermissionDenied(
        "a session is used at its own origin (" +
        sessionOrigin(id, server.sessionOrigins(), req[http::field::host]) +
        "), not the console's; open it from the console"));
    co_return co_await reply(stream, req, res);
  }
  if (cred.viaCookie && (upgrade || !safe) && !sameOrigin(req)) {
    auto res = ApiResponse::error(Status::PermissionDenied(
        "a request to a session with a cookie must come from the session's own origin"));
    co_return co_await reply(stream, req, res);
  }
  auto endpoint = server.cluster().sessions().open(*cred.principal, id);
  if (!endpoint.ok()) {
    auto res = ApiResponse::error(endpoint.status());
    if (endpoint.status().code() == Code::kUnavailable)
      res.headers.emplace_back("Retry-After", "1");
    co_return co_await reply(stream, req, res);
  }
  if (cred.viaCookie && !ownOrigin) {
    // A browser following a link from the console: on to the session's origin, with the
    // console session behind a one-time ticket. Only where that origin is one: the default
    // domain, localhost, names the browser's own machine, which is allotd's only on loopback.
    if (!server.sessionOrigins().configured && !isLoopbackHost(req[http::field::host])) {
      auto res = ApiResponse::error(Status::FailedPrecondition(
          "sessions have no origin of their own on this server (allotd --session-domain is not "
          "set); use a token, or ask the platform admin to set it (docs/sessions.md, Origins)"));
      co_return co_await reply(stream, req, res);
    }
    const std::string ticket =
        server.sessionAccess().mintTicket(id, cred.secret, server.clock().nowMs());
    ApiResponse res{http::status::found, "", "text/plain", {}};
    res.headers.emplace_back(
        "Location", sessionOrigin(id, server.sessionOrigins(), req[http::field::host]) + base +
                        std::string(kHandoffPath) + "?ticket=" + ticket +
                        "&next=" + boost::urls::encode(targetText, boost::urls::unreserved_chars));
    res.headers.emplace_back("Cache-Control", "no-store");
    res.headers.emplace_back("Referrer-Policy", "no-referrer");
    co_return co_await reply(stream, req, res);
  }
  if (endpoint->app.rfind("jupyter", 0) != 0) {
    auto res = ApiResponse::error(Status::FailedPrecondition(
        "session " + std::to_string(id) + " runs no Jupyter; connect with allot ssh"));
    co_return co_await reply(stream, req, res);
  }

  // Jupyter serves neither; and Beast refuses to write a TRACE with a body (it throws), which
  // ended the connection without an answer.
  if (req.method() == http::verb::trace || req.method() == http::verb::connect) {
    ApiResponse res = ApiResponse::error(Status::InvalidArgument(
        std::string(req.method_string()) + " is not allowed on a session", "method"));
    res.status = http::status::method_not_allowed;
    res.headers.emplace_back("Allow", "GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE");
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
  // allotd has the whole body already (and said 100 Continue itself): Jupyter's own 100 would be
  // taken below for its answer, and the real one never reach the client.
  req.erase(http::field::expect);
  req.set(http::field::host, "localhost");
  beast::error_code peerError;
  const auto peer = beast::get_lowest_layer(stream).socket().remote_endpoint(peerError);
  if (!peerError) req.set("X-Forwarded-For", peer.address().to_string());
  if (!upgrade) req.prepare_payload();
  // The header, then the body as it is: serializing the whole request copied a body twice more,
  // so a 256 MiB notebook held three times that of allotd's memory. (prepare_payload gave it a
  // Content-Length; a body it could not is written whole, as before.)
  std::ostringstream wire;
  std::string body;
  if (req.chunked()) {
    wire << req;
  } else {
    wire << req.base();
    body = std::move(req.body());
    req.body().clear();
  }

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
  server.cluster().sessions().proxied(id);
  // Named, not a temporary in the co_await: GCC 12 may destroy such a temporary twice.
  std::string head = std::move(wire).str();
  Status sent = co_await t->write(std::move(head));
  if (sent.ok() && !body.empty()) sent = co_await t->write(std::move(body));
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
      server.cluster().sessions().relay(id, true);
      co_await relayUpgraded(stream, buffer, t, accessCheck(server, cred, id, /*ssh=*/false));
      server.cluster().sessions().relay(id, false);
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
                       asciiIEquals(req[http::field::upgrade], "tcp") &&
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
  auto endpoint = server.cluster().sessions().openSsh(*cred.principal, id);
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
  server.cluster().sessions().relay(id, true);
  co_await relayUpgraded(stream, buffer, *opened, accessCheck(server, cred, id, /*ssh=*/true));
  server.cluster().sessions().relay(id, false);
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
