#pragma once
// The server end of an agent's WebSocket (see model/agent_protocol.h).

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <utility>

#include "api/http_types.h"

namespace allot::api {

class Server;

// Authenticates the upgrade with the host credential, then serves the stream until it closes or
// the credential stops being valid (checked with every message). Plain (ws://) and TLS (wss://)
// connections share one implementation.
boost::asio::awaitable<void> serveAgentStream(Server& server, boost::beast::tcp_stream stream,
                                              HttpRequest request);
boost::asio::awaitable<void> serveAgentStream(
    Server& server, boost::beast::ssl_stream<boost::beast::tcp_stream> stream, HttpRequest request);

}  // namespace allot::api
