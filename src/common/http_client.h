#pragma once
// HttpClient: the one synchronous HTTP/1.1 client, over plain TCP or TLS (https://), for the CLI
// and the agent's join (allotd's own webhooks are asynchronous, on its I/O thread: api/webhook.h).
// It talks to one server, keeps one keep-alive connection open across calls and reopens it when the
// server has closed it. Not thread-safe: one thread calls it. Errors come back as Status
// (kUnavailable for "cannot reach", kInvalidArgument for a bad URL); no exception leaves this
// module.

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace allot {

// A parsed server address: http(s)://host[:port][/base].
struct ServerUrl {
  std::string host;      // without IPv6 brackets
  std::string port;      // "80" (http) or "443" (https) when the URL names none
  bool tls = false;      // https: the certificate must chain to the CA and name `host`
  std::string basePath;  // "" or "/prefix", never ending in '/'
  std::string text;      // the URL as given, for messages
};

// Accepts "http://host:port[/base]", "https://host:port[/base]" and, as a convenience,
// "host:port" (plain http).
Result<ServerUrl> parseServerUrl(std::string_view url);

struct HttpResponse {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // keys lower-cased

  // The header's value, or "" when absent; `name` is matched case-insensitively.
  std::string header(std::string_view name) const;
};

struct HttpClientOptions {
  std::chrono::milliseconds connectTimeout{10'000};
  std::chrono::milliseconds requestTimeout{30'000};
  std::string caFile;  // PEM CA(s) for https; "" = the system's trusted CAs
};

class HttpClient {
 public:
  // `token` may be empty: then no Authorization header is sent.
  static Result<std::unique_ptr<HttpClient>> create(std::string_view url, std::string token,
                                                    HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends one request; `target` is the path and query under the URL's base path ("/api/v1/x?y=1").
  // `timeout` of zero means the client's requestTimeout. Any HTTP status is a successful Result.
  Result<HttpResponse> request(std::string_view method, std::string_view target,
                               std::string_view body = {},
                               std::chrono::milliseconds timeout = std::chrono::milliseconds{0});

  // Upgrades a fresh connection (GET `target` with "Connection: Upgrade", "Upgrade: `protocol`")
  // and then copies bytes until either side ends: `inFd` to the server, the server to `outFd`
  // (allot ssh --stdio's pipe). A reply other than 101 comes back as the HttpResponse, for the
  // caller to turn into an error; after a relay it is the 101 itself.
  Result<HttpResponse> relayUpgraded(std::string_view target, std::string_view protocol, int inFd,
                                     int outFd);

  const ServerUrl& url() const;
  bool hasToken() const;
  // How many TCP connections this client has opened so far (keep-alive makes it stay at 1).
  int connectionsOpened() const;

 private:
  struct Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace allot
