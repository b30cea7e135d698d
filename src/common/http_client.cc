#include "common/http_client.h"

#include <cctype>
#include <cstdio>
// GCC 12 needs <utility> ahead of Boost.Asio; keep clang-format from sorting it after.
// clang-format off
#include <utility>
// clang-format on

#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>

#include "common/http_url.h"
#include "common/tls.h"

namespace allot {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr const char* kUserAgent = "allot-cli/0.1";

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string seconds(std::chrono::milliseconds ms) {
  auto s = ms.count() / 1000.0;
  char buf[32];
  snprintf(buf, sizeof buf, "%gs", s);
  return buf;
}

bool isIdempotent(http::verb v) {
  return v == http::verb::get || v == http::verb::head || v == http::verb::options;
}

// Errors that mean "the server closed our idle keep-alive connection".
bool isStaleConnection(const beast::error_code& ec) {
  // Over TLS, a peer that closed without close_notify reads as a truncated stream.
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::ssl::error::stream_truncated;
}

}  // namespace

Result<ServerUrl> parseServerUrl(std::string_view url) {
  ServerUrl out;
  out.text = std::string(url);
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("bad server URL '" + std::string(url) + "': " + why);
  };
  // "gpu-head:7070" is short for http://gpu-head:7070.
  if (url.find("://") == std::string_view::npos) out.text = "http://" + out.text;
  auto u = parseHttpUrl(out.text);
  if (!u.ok()) return bad(u.status().message());
  out.tls = u->scheme == "https";
  if (u->scheme != "http" && !out.tls)
    return bad("unsupported scheme '" + u->scheme + "'; use http://host:port or https://host:port");
  if (u->hasUserinfo) return bad("credentials in the URL are not supported; use --token");
  if (u->hasQuery || u->hasFragment) return bad("no query or fragment allowed");
  out.host = u->host;
  out.port = u->port ? std::to_string(*u->port) : (out.tls ? "443" : "80");
  std::string_view path = u->path;
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  out.basePath = std::string(path);
  while (!out.text.empty() && out.text.back() == '/') out.text.pop_back();
  return out;
}

std::string HttpResponse::header(std::string_view name) const {
  auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

struct HttpClient::Impl {
  ServerUrl url;
  std::string token;
  HttpClientOptions options;
  asio::io_context ioc;
  // One of the two is open while connected: https uses `secure`, made anew for each connection
  // (a TLS session does not outlive its connection).
  beast::tcp_stream plain{ioc};
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  std::shared_ptr<asio::ssl::context> tls;
  beast::flat_buffer buffer;
  bool connected = false;
  int connectionsOpened = 0;

  // Runs queued async work to completion; tcp_stream's expiry is what bounds it.
  void runPending() {
    ioc.restart();
    ioc.run();
  }

  beast::tcp_stream& tcpLayer() { return secure ? beast::get_lowest_layer(*secure) : plain; }
  // Calls fn with whichever stream is in use.
  template <typename Fn>
  void withStream(Fn fn) {
    if (secure) {
      fn(*secure);
    } else {
      fn(plain);
    }
  }

  void close() {
    beast::error_code ignored;
    tcpLayer().socket().shutdown(tcp::socket::shutdown_both, ignored);
    tcpLayer().close();
    secure.reset();
    buffer.clear();
    connected = false;
  }

  Status unreachable(const std::string& why) const {
    return Status::Unavailable("cannot reach server at " + url.text + ": " + why);
  }

  Status connect() {
    tcp::resolver resolver(ioc);
    beast::error_code ec;
    auto endpoints = resolver.resolve(url.host, url.port, ec);
    if (ec) return unreachable(ec.message());
    if (url.tls) {
      secure.emplace(ioc, *tls);
      ALLOT_RETURN_IF_ERROR(tls::expectPeerName(secure->native_handle(), url.host));
    }
    tcpLayer().expires_after(options.connectTimeout);
    tcpLayer().async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
    runPending();
    if (ec == beast::error::timeout) {
      return unreachable("no connection within " + seconds(options.connectTimeout));
    }
    if (ec) return unreachable(ec.message());
    tcpLayer().socket().set_option(tcp::no_delay(true), ec);
    if (secure) {
      secure->async_handshake(asio::ssl::stream_base::client, [&](beast::error_code e) { ec = e; });
      runPending();
      if (ec) {
        close();
        // Most often an untrusted certificate or a name it does not carry.
        return unreachable("TLS handshake failed: " + ec.message());
      }
    }
    connected = true;
    ++connectionsOpened;
    return Status::Ok();
  }

  // One request and its reply on the open connection. `wrote` tells the caller whether the
  // request left in full, and `readAny` whether any reply byte arrived, so it can decide to retry.
  Result<HttpResponse> exchange(http::verb verb, std::string_view target, std::string_view body,
                                std::chrono::milliseconds timeout, bool& wrote, bool& readAny,
                                beast::error_code& ecOut) {
    http::request<http::string_body> req{verb, url.basePath + std::string(target), 11};
    const bool defaultPort = url.port == (url.tls ? "443" : "80");
    req.set(http::field::host, defaultPort ? url.host : url.host + ":" + url.port);
    req.set(http::field::user_agent, kUserAgent);
    req.set(http::field::accept, "application/json");
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    if (!body.empty()) {
      req.set(http::field::content_type, "application/json");
      req.body() = std::string(body);
    }
    req.keep_alive(true);
    req.prepare_payload();

    beast::error_code ec;
    tcpLayer().expires_after(timeout);
    withStream([&](auto& stream) {
      http::async_write(stream, req, [&](beast::error_code e, size_t) { ec = e; });
    });
    runPending();
    wrote = !ec;
    if (ec) {
      ecOut = ec;
      return Status::Unavailable(ec.message());
    }

    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    size_t before = buffer.size();
    withStream([&](auto& stream) {
      http::async_read(stream, buffer, parser, [&](beast::error_code e, size_t) { ec = e; });
    });
    runPending();
    readAny = parser.got_some() || buffer.size() != before;
    if (ec) {
      ecOut = ec;
      if (ec == beast::error::timeout) {
        return Status::Unavailable("no reply from server at " + url.text + " within " +
                                   seconds(timeout));
      }
      return Status::Unavailable("lost connection to server at " + url.text + ": " + ec.message());
    }
    auto& res = parser.get();
    HttpResponse out;
    out.status = static_cast<int>(res.result_int());
    for (const auto& field : res) {
      out.headers[lower(field.name_string())] = std::string(field.value());
    }
    out.body = std::move(res.body());
    if (!res.keep_alive()) close();
    return out;
  }
};

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpClient::~HttpClient() {
  if (impl_ && impl_->connected) impl_->close();
}

Result<std::unique_ptr<HttpClient>> HttpClient::create(std::string_view url, std::string token,
                                                       HttpClientOptions options) {
  auto parsed = parseServerUrl(url);
  if (!parsed.ok()) return parsed.status();
  auto impl = std::make_unique<Impl>();
  impl->url = std::move(parsed.value());
  impl->token = std::move(token);
  impl->options = options;
  if (impl->url.tls) {
    auto ctx = tls::clientContext(options.caFile);
    if (!ctx.ok()) return ctx.status().withContext("--ca-file");
    impl->tls = *ctx;
  }
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

Result<HttpResponse> HttpClient::request(std::string_view method, std::string_view target,
                                         std::string_view body, std::chrono::milliseconds timeout) {
  Impl& d = *impl_;
  http::verb verb = http::string_to_verb(method);
  if (verb == http::verb::unknown) {
    return Status::Internal("unknown HTTP method '" + std::string(method) + "'");
  }
  if (timeout.count() <= 0) timeout = d.options.requestTimeout;

  // A reused connection may have been closed by the server while idle; then open a fresh one and
  // send again, but only when that cannot run a write twice.
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool reused = d.connected;
    if (!d.connected) ALLOT_RETURN_IF_ERROR(d.connect());
    bool wrote = false, readAny = false;
    beast::error_code ec;
    auto res = d.exchange(verb, target, body, timeout, wrote, readAny, ec);
    if (res.ok()) return res;
    d.close();
    bool retry = reused && !readAny && ec != beast::error::timeout &&
                 (!wrote || (isIdempotent(verb) && isStaleConnection(ec)));
    if (!retry) {
      if (!wrote && !reused) return d.unreachable(ec.message());
      return res.status();
    }
  }
  return d.unreachable("the connection kept closing");
}

namespace {

// Copies `from` to `to` until EOF or an error; then runs `done` (which ends the other direction).
template <typename From, typename To, typename Done>
asio::awaitable<void> pump(From& from, To& to, Done done) {
  std::string buf(64 * 1024, '\0');
  for (;;) {
    auto [ec, n] =
        co_await from.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    if (ec || n == 0) break;
    auto [wec, wn] = co_await asio::async_write(to, asio::buffer(buf.data(), n),
                                                asio::as_tuple(asio::use_awaitable));
    if (wec) break;
  }
  done();
}

}  // namespace

Result<HttpResponse> HttpClient::relayUpgraded(std::string_view target, std::string_view protocol,
                                               int inFd, int outFd) {
  Impl& d = *impl_;
  if (d.connected) d.close();
  ALLOT_RETURN_IF_ERROR(d.connect());
  http::request<http::empty_body> req{http::verb::get, d.url.basePath + std::string(target), 11};
  const bool defaultPort = d.url.port == (d.url.tls ? "443" : "80");
  req.set(http::field::host, defaultPort ? d.url.host : d.url.host + ":" + d.url.port);
  req.set(http::field::user_agent, kUserAgent);
  req.set(http::field::connection, "Upgrade");
  req.set(http::field::upgrade, std::string(protocol));
  if (!d.token.empty()) req.set(http::field::authorization, "Bearer " + d.token);
  beast::error_code ec;
  d.tcpLayer().expires_after(d.options.requestTimeout);
  d.withStream([&](auto& stream) {
    http::async_write(stream, req, [&](beast::error_code e, size_t) { ec = e; });
  });
  d.runPending();
  http::response_parser<http::string_body> parser;
  parser.body_limit(1 << 20);
  if (!ec) {
    d.withStream([&](auto& stream) {
      http::async_read_header(stream, d.buffer, parser,
                              [&](beast::error_code e, size_t) { ec = e; });
    });
    d.runPending();
  }
  if (!ec && parser.get().result() != http::status::switching_protocols) {
    d.withStream([&](auto& stream) {
      http::async_read(stream, d.buffer, parser, [&](beast::error_code e, size_t) { ec = e; });
    });
    d.runPending();
  }
  if (ec) {
    d.close();
    return Status::Unavailable("lost connection to server at " + d.url.text + ": " + ec.message());
  }
  HttpResponse out;
  out.status = static_cast<int>(parser.get().result_int());
  for (const auto& field : parser.get())
    out.headers[lower(field.name_string())] = std::string(field.value());
  out.body = parser.get().body();
  if (out.status != 101) {
    d.close();
    return out;
  }

  // Bytes both ways. The descriptors are duplicated: asio closes what it holds.
  d.tcpLayer().expires_never();
  asio::posix::stream_descriptor in(d.ioc), out2(d.ioc);
  for (auto [desc, fd] : {std::pair{&in, inFd}, std::pair{&out2, outFd}}) {
    const int copy = ::dup(fd);
    desc->assign(copy, ec);
    if (ec) {
      // A regular file or /dev/null cannot be waited on; ssh gives its ProxyCommand pipes.
      if (copy >= 0) ::close(copy);
      d.close();
      return Status::InvalidArgument("descriptor " + std::to_string(fd) +
                                     " is not a pipe, socket or terminal: " + ec.message());
    }
  }
  if (d.buffer.size() > 0) {
    // What came right behind the 101 (the server's SSH banner).
    asio::write(out2, d.buffer.data(), ec);
    d.buffer.consume(d.buffer.size());
  }
  auto finish = [&] {
    beast::error_code ignored;
    in.cancel(ignored);
    d.tcpLayer().socket().shutdown(tcp::socket::shutdown_both, ignored);
    d.tcpLayer().socket().cancel(ignored);
  };
  d.withStream([&](auto& stream) {
    // Our input ending (ssh closed its end) ends the whole connection: one SSH session.
    asio::co_spawn(d.ioc, pump(in, stream, finish), asio::detached);
    asio::co_spawn(d.ioc, pump(stream, out2, finish), asio::detached);
  });
  d.runPending();
  d.close();
  return out;
}

const ServerUrl& HttpClient::url() const { return impl_->url; }
bool HttpClient::hasToken() const { return !impl_->token.empty(); }
int HttpClient::connectionsOpened() const { return impl_->connectionsOpened; }

}  // namespace allot
