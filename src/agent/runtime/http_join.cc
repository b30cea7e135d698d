#include "agent/runtime/http_join.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/bounded_json.h"
#include "common/http_url.h"
#include "common/tls.h"

namespace allot::agent {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

Result<ServerAddress> parseServerUrl(const std::string& url) {
  auto bad = [&] {
    return Status::InvalidArgument("--server: expected http(s)://HOST:PORT, got '" + url + "'");
  };
  auto u = parseHttpUrl(url);
  if (!u.ok() || (u->scheme != "http" && u->scheme != "https") || u->hasUserinfo) return bad();
  ServerAddress a;
  a.tls = u->scheme == "https";
  a.host = u->host;
  a.port = u->port ? std::to_string(*u->port) : (a.tls ? "443" : "80");
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
