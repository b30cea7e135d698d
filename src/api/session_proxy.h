#pragma once
// The reverse proxy to sessions' Jupyter servers: /sessions/{id}/... on allotd, HTTP and
// WebSocket (docs/sessions.md, "Opening a session"). Each request is authenticated with the same
// credentials as the API (console cookie or bearer token); only the session's owner and the users
// it is shared with get through, anyone else is told it does not exist. allotd then supplies
// Jupyter's token itself, drops its own credentials from what it forwards, and carries the bytes
// over a tunnel stream on the host's agent connection (api/tunnel_hub.h), so hosts need no open
// port. A client connection keeps its tunnel stream between requests to the same session
// (keep-alive on both sides); a WebSocket upgrade turns the connection into a raw relay.
//
// CSRF: Jupyter skips its own XSRF check for token-authenticated requests, so allotd does it:
// a cookie-authenticated request that is not GET/HEAD/OPTIONS, and every WebSocket upgrade, must
// carry an Origin naming this server (the cookie is also SameSite=Strict).

#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/http_types.h"
#include "tunnel/tunnel_stream.h"

namespace allot::api {

class Server;

// What one client connection holds between its requests to sessions.
struct SessionProxyState {
  int64_t session = 0;
  std::shared_ptr<tunnel::TunnelStream> stream;  // to that session's Jupyter; reused while open
};

// The largest request body forwarded to a session (a notebook saved with its outputs).
inline constexpr size_t kSessionBodyLimit = 256u << 20;

// "/sessions/..." (with or without anything after the id).
bool isSessionPath(std::string_view target);

// How many bodies past the API's limit are read or forwarded at once, across all connections:
// each may hold kSessionBodyLimit of allotd's memory. Those beyond wait their turn (503).
inline constexpr size_t kSessionBodiesAtOnce = 4;
// How many of those one user may hold: a user sending bodies slowly keeps the others' turn.
inline constexpr size_t kSessionBodiesPerUser = 2;

// The user a request to a session is from (its header is enough), when it carries a credential
// that is valid now (a bearer token, a console cookie, or the cookie of the session origin it was
// sent to) and that may open the session it names; nullopt otherwise. Touches no idle clock.
std::optional<std::string> sessionCaller(Server& server, const HttpRequest& header);

// Serves `req` (read from `stream`, with `buffer` holding whatever was read past it). Returns
// whether the connection may carry another request.
boost::asio::awaitable<bool> serveSessionRequest(Server& server, boost::beast::tcp_stream& stream,
                                                 boost::beast::flat_buffer& buffer, HttpRequest req,
                                                 SessionProxyState& state);
boost::asio::awaitable<bool> serveSessionRequest(
    Server& server, boost::beast::ssl_stream<boost::beast::tcp_stream>& stream,
    boost::beast::flat_buffer& buffer, HttpRequest req, SessionProxyState& state);

// SSH into a session (docs/sessions.md, "SSH"): GET /api/v1/sessions/{id}/ssh with
// "Connection: Upgrade" and "Upgrade: tcp" (as Docker's attach), authenticated like the API and
// allowed to the session's owner only. After the 101 the connection carries the bytes of one SSH
// connection to the session's sshd on its host; `allot ssh --stdio` is the client end.
bool isSessionSshPath(std::string_view target);
boost::asio::awaitable<void> serveSessionSsh(Server& server, boost::beast::tcp_stream& stream,
                                             boost::beast::flat_buffer& buffer, HttpRequest req);
boost::asio::awaitable<void> serveSessionSsh(
    Server& server, boost::beast::ssl_stream<boost::beast::tcp_stream>& stream,
    boost::beast::flat_buffer& buffer, HttpRequest req);

}  // namespace allot::api
