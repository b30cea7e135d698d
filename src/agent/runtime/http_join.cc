#include "agent/runtime/http_join.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/bounded_json.h"
#include "common/tls.h"

namespace allot::agent {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

Result<ServerAddress> parseServerUrl(const std::string& url) {
  ServerAddress a;
  a.tls = url.rfind("https://", 0) == 0;
  const std::string scheme = a.tls ? "https://" : "http://";
  if (url.rfind(scheme, 0) != 0)
    return Status::InvalidArgument("--server: expected http(s)://HOST:PORT, got '" + url + "'");
  std::string rest = url.substr(scheme.size());
  if (auto slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  auto colon = rest.rfind(':');
  if (rest.size() > 0 && rest.front() == '[' && rest.back() == ']') colon = std::string::npos;
  if (colon == std::string::npos) {
    a.host = rest;
    a.port = a.tls ? "443" : "80";
  } else {
    a.host = rest.substr(0, colon);
    a.port = rest.substr(colon + 1);
  }
  if (a.host.size() > 2 && a.host.front() == '[') a.host = a.host.substr(1, a.host.size() - 2);
  if (a.host.empty() || a.port.empty())
    return Status::InvalidArgument("--server: expected http(s)://HOST:PORT, got '" + url + "'");
  return a;
}

namespace {

// One request and its reply on a connected stream, plain or TLS.
template <typename Stream>
http::response<http::string_body> roundTrip(Stream& stream,
                                            const http::request<http::string_body>& req) {
  http::write(stream, req);
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(stream, buf, res);
  return res;
}

}  // namespace

Result<JoinResult> joinCluster(const ServerAddress& server, const std::string& caFile,
                               const std::string& joinToken, const std::string& name,
                               const model::Inventory& inventory) {
  http::request<http::string_body> req{http::verb::post, "/api/v1/hosts/join", 11};
  req.set(http::field::host, server.host);
  req.set(http::field::content_type, "application/json");
  req.body() =
      nlohmann::json{
          {"name", name}, {"join_token", joinToken}, {"inventory", model::toJson(inventory)}}
          .dump();
  req.prepare_payload();
  const std::string where = server.host + ":" + server.port;
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    http::response<http::string_body> res;
    if (server.tls) {
      auto ctx = tls::clientContext(caFile);
      if (!ctx.ok()) return ctx.status();
      beast::ssl_stream<beast::tcp_stream> stream(io, **ctx);
      beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(15));
      ALLOT_RETURN_IF_ERROR(tls::expectPeerName(stream.native_handle(), server.host));
      beast::get_lowest_layer(stream).connect(resolver.resolve(server.host, server.port));
      stream.handshake(asio::ssl::stream_base::client);
      res = roundTrip(stream, req);
    } else {
      beast::tcp_stream stream(io);
      stream.expires_after(std::chrono::seconds(15));
      stream.connect(resolver.resolve(server.host, server.port));
      res = roundTrip(stream, req);
    }
    auto body = parseBoundedJson(res.body());
    if (res.result() != http::status::ok) {
      std::string msg = body.is_object() && body.contains("error")
                            ? body["error"].value("message", res.body())
                            : res.body();
      return Status::Unauthenticated("joining " + where + " failed: " + msg);
    }
    return JoinResult{body.at("host").at("name").get<std::string>(),
                      body.at("credential").get<std::string>()};
  } catch (const std::exception& e) {
    return Status::Unavailable("cannot reach allotd at " + where + ": " + e.what());
  }
}

}  // namespace allot::agent
