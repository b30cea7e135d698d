#include "agent/runtime/http_join.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <utility>

namespace allot::agent {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

Result<ServerAddress> parseServerUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0)
    return Status::InvalidArgument(
        "--server: https is not supported yet; use http:// on a trusted network or a "
        "TLS-terminating proxy");
  if (url.rfind(scheme, 0) != 0)
    return Status::InvalidArgument("--server: expected http://HOST:PORT, got '" + url + "'");
  std::string rest = url.substr(scheme.size());
  if (auto slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  auto colon = rest.rfind(':');
  ServerAddress a;
  if (colon == std::string::npos) {
    a.host = rest;
    a.port = "80";
  } else {
    a.host = rest.substr(0, colon);
    a.port = rest.substr(colon + 1);
  }
  if (a.host.size() > 2 && a.host.front() == '[') a.host = a.host.substr(1, a.host.size() - 2);
  if (a.host.empty() || a.port.empty())
    return Status::InvalidArgument("--server: expected http://HOST:PORT, got '" + url + "'");
  return a;
}

Result<JoinResult> joinCluster(const ServerAddress& server, const std::string& joinToken,
                               const std::string& name, const model::Inventory& inventory) {
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(15));
    stream.connect(resolver.resolve(server.host, server.port));
    http::request<http::string_body> req{http::verb::post, "/api/v1/hosts/join", 11};
    req.set(http::field::host, server.host);
    req.set(http::field::content_type, "application/json");
    req.body() =
        nlohmann::json{
            {"name", name}, {"join_token", joinToken}, {"inventory", model::toJson(inventory)}}
            .dump();
    req.prepare_payload();
    http::write(stream, req);
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(stream, buf, res);
    auto body = nlohmann::json::parse(res.body(), nullptr, false);
    if (res.result() != http::status::ok) {
      std::string msg = body.is_object() && body.contains("error")
                            ? body["error"].value("message", res.body())
                            : res.body();
      return Status::Unauthenticated("joining " + server.host + ":" + server.port +
                                     " failed: " + msg);
    }
    return JoinResult{body.at("host").at("name").get<std::string>(),
                      body.at("credential").get<std::string>()};
  } catch (const std::exception& e) {
    return Status::Unavailable("cannot reach allotd at " + server.host + ":" + server.port + ": " +
                               e.what());
  }
}

}  // namespace allot::agent
