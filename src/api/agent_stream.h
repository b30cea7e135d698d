#pragma once
// The server end of an agent's WebSocket (see model/agent_protocol.h).

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <utility>

#include "api/http_types.h"

namespace allot::api {

class Server;

// Authenticates the upgrade with the host credential, then serves the stream until it closes.
boost::asio::awaitable<void> serveAgentStream(Server& server, boost::beast::tcp_stream stream,
                                              HttpRequest request);

}  // namespace allot::api
