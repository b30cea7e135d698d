#include "agent/runtime/http_join.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/http_client.h"
#include "common/http_url.h"

namespace allot::agent {

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

Result<JoinResult> joinCluster(const ServerAddress& server, const std::string& caFile,
                               const std::string& joinToken, const std::string& name,
                               const model::Inventory& inventory) {
  const bool ipv6 = server.host.find(':') != std::string::npos;
  const std::string where = (ipv6 ? "[" + server.host + "]" : server.host) + ":" + server.port;
  HttpClientOptions options;
  options.connectTimeout = std::chrono::seconds(15);
  options.requestTimeout = std::chrono::seconds(15);
  options.caFile = caFile;
  auto client = HttpClient::create((server.tls ? "https://" : "http://") + where, "", options);
  if (!client.ok()) return client.status();
  const std::string body =
      nlohmann::json{
          {"name", name}, {"join_token", joinToken}, {"inventory", model::toJson(inventory)}}
          .dump();
  auto res = (*client)->request("POST", "/api/v1/hosts/join", body);
  if (!res.ok()) return res.status();
  auto reply = parseBoundedJson(res->body);
  if (res->status != 200) {
    std::string msg = reply.is_object() && reply.contains("error") && reply["error"].is_object()
                          ? reply["error"].value("message", res->body)
                          : res->body;
    return Status::Unauthenticated("joining " + where + " failed: " + msg);
  }
  try {
    return JoinResult{reply.at("host").at("name").get<std::string>(),
                      reply.at("credential").get<std::string>()};
  } catch (const std::exception&) {
    return Status::Unavailable("joining " + where + ": the server's answer is not a join");
  }
}

}  // namespace allot::agent
