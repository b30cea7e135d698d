#include "api/event_stream.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <nlohmann/json.hpp>

#include "api/event_hub.h"
#include "api/server.h"

namespace allot::api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using Clock = std::chrono::steady_clock;

// A burst of commits (a scheduling pass, a drain) becomes one message, and a console refetches
// at most twice a second however busy the cluster is.
constexpr auto kCoalesce = std::chrono::milliseconds(500);
// A client that stops reading is dropped once a write has waited this long.
constexpr auto kWriteTimeout = std::chrono::seconds(30);

// Close-delimited body: no chunking, the connection ends with the stream. Proxies must not
// buffer it (X-Accel-Buffering is nginx's switch).
constexpr const char* kHeader =
    "HTTP/1.1 200 OK\r\n"
    "Server: allotd\r\n"
    "Content-Type: text/event-stream\r\n"
    "Cache-Control: no-store\r\n"
    "X-Accel-Buffering: no\r\n"
    "Connection: close\r\n"
    "\r\n";

template <typename Stream>
asio::awaitable<bool> send(Stream& stream, const std::string& text) {
  beast::get_lowest_layer(stream).expires_after(kWriteTimeout);
  auto [ec, n] =
      co_await asio::async_write(stream, asio::buffer(text), asio::as_tuple(asio::use_awaitable));
  co_return !ec;
}

std::string eventText(const char* event, const nlohmann::json& data) {
  return std::string("event: ") + event + "\ndata: " + data.dump() + "\n\n";
}

template <typename Stream>
asio::awaitable<void> serve(Server& server, Stream& stream, const StreamCredential& cred) {
  EventHub& hub = server.events();
  asio::steady_timer wake(server.io());
  EventHub::Subscriber sub(hub, wake);
  const auto keepalive = std::chrono::milliseconds(server.config().streamKeepaliveMs);

  std::string first = std::string(kHeader) + eventText("hello", {{"rev", hub.rev()}});
  bool ok = co_await send(stream, first);
  if (!ok) co_return;
  auto lastChange = Clock::time_point::min();
  auto nextKeepalive = Clock::now() + keepalive;
  for (;;) {
    auto deadline = nextKeepalive;
    if (sub.pending() != 0) deadline = std::min(deadline, lastChange + kCoalesce);
    wake.expires_at(deadline);
    // Cancelled by EventHub::publish when news comes to an idle stream; the loop recomputes.
    co_await wake.async_wait(asio::as_tuple(asio::use_awaitable));
    const auto now = Clock::now();
    if (sub.pending() != 0 && now >= lastChange + kCoalesce) {
      const uint32_t topics = sub.take();
      std::string msg = eventText("change", {{"rev", hub.rev()}, {"topics", topicNames(topics)}});
      ok = co_await send(stream, msg);
      if (!ok) co_return;
      lastChange = now;
    }
    if (now >= nextKeepalive) {
      // A revoked or expired token, an ended or idle session, a disabled user: the stream ends
      // too. The check does not count as session activity (LoginService::stillValid).
      if (!server.login().stillValid(cred.secret, cred.viaCookie, server.cluster())) {
        std::string bye = eventText("expired", nlohmann::json::object());
        co_await send(stream, bye);
        co_return;
      }
      std::string ping = ": keepalive\n\n";
      ok = co_await send(stream, ping);
      if (!ok) co_return;
      nextKeepalive = now + keepalive;
    }
  }
}

}  // namespace

asio::awaitable<void> serveEventStream(Server& server, beast::tcp_stream& stream,
                                       const StreamCredential& cred) {
  co_await serve(server, stream, cred);
}

asio::awaitable<void> serveEventStream(Server& server, beast::ssl_stream<beast::tcp_stream>& stream,
                                       const StreamCredential& cred) {
  co_await serve(server, stream, cred);
}

}  // namespace allot::api
