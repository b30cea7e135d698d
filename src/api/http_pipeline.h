#pragma once
// The stages a request goes through on allotd's HTTP port, in the order Server::serveHttp runs
// them on one connection:
//   read          the header, then a body within the limit the header earns (server.cc)
//   dispatch      who owns the request: a session's Jupyter or an SSH relay (session_proxy.h),
//                 an agent's WebSocket (agent_stream.h), or the API and the console below
//   route         the API's route for the method and path; else a console file, 404 or 405
//   authenticate  the credential to a principal (login_service.h); host credentials refused
//   handle        the route's handler, with its audit entry, as one write (Server::runHandler)
//   encode        the HTTP response: headers, gzip, HEAD
// Each stage is a function of its own, so each is read, changed and tested alone.

#include <boost/asio/awaitable.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include "api/event_stream.h"
#include "api/http_types.h"

namespace allot::api {

class Server;

enum class RequestOwner {
  kSessionProxy,  // a session's Jupyter traffic: neither audited nor in the API's metrics
  kSessionSsh,    // becomes one SSH connection's relay
  kAgentStream,   // an agent's WebSocket
  kApi,           // the API, the console's files, or an error for a path that is neither
};
// onSessionOrigin: the Host header names a session's origin (api/session_origin.h), which
// serves that session's Jupyter and nothing else.
RequestOwner dispatch(const HttpRequest& req, bool onSessionOrigin);

// What the API's stages make of a request: a response to encode, or (eventStream set) a live
// event stream that takes the connection over.
struct ApiOutcome {
  ApiResponse response;
  std::optional<StreamCredential> eventStream;
};
// Route, authenticate and handle one request that dispatch gave to the API; records the
// request in the API's metrics.
boost::asio::awaitable<ApiOutcome> serveApi(Server& server, const HttpRequest& req,
                                            bool onSessionOrigin, const std::string& peerAddress);

http::response<http::string_body> encodeResponse(const HttpRequest& req, ApiResponse res);
// The status line and header fields of `out`, ending with the blank line, byte for byte as
// Beast's serializer writes them. The body follows as a second buffer of the same write: Beast's
// serializer walks nested buffer views on every write, which cost a job's submission more
// instructions than writing its whole reply (docs/benchmarks.md, section 1).
std::string responseHead(const http::response_header<>& out);
// The answer to a body over `limit` bytes; the connection closes after it.
http::response<http::string_body> encodeTooLarge(size_t limit);
// The answer to a request that could not be read (`why` names the header or the body); the
// connection closes after it.
http::response<http::string_body> encodeUnreadable(const Status& why);

// The first path or query parameter of req that is not UTF-8 ("" when all are).
std::string nonUtf8Parameter(const ApiRequest& req);

}  // namespace allot::api
