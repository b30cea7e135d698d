#pragma once
// The server end of GET /api/v1/stream: server-sent events that tell the web console when to
// refetch (see api/event_hub.h for what they carry, and docs/api.md "Live updates").

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <string>
#include <utility>

namespace allot::api {

class Server;

// The credential that opened the stream, re-checked at every keepalive.
struct StreamCredential {
  std::string secret;  // bearer token or session cookie value; never logged
  bool viaCookie = false;
};

// Writes the response header and `hello`, then change notices (at most one per
// kCoalesceMs), keepalives every ServerConfig::streamKeepaliveMs, and `expired` before closing
// when the credential stops being valid. Returns when the client goes away or after `expired`;
// the caller closes the connection.
boost::asio::awaitable<void> serveEventStream(Server& server, boost::beast::tcp_stream& stream,
                                              const StreamCredential& cred);
boost::asio::awaitable<void> serveEventStream(
    Server& server, boost::beast::ssl_stream<boost::beast::tcp_stream>& stream,
    const StreamCredential& cred);

}  // namespace allot::api
