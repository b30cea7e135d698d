#include "api/agent_stream.h"

#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <chrono>
#include <deque>
#include <optional>
#include <variant>

#include "api/server.h"
#include "common/bounded_json.h"
#include "common/log.h"
#include "model/agent_protocol.h"
#include "model/image_cache.h"
#include "model/tunnel_frame.h"
#include "protocol/agent_messages.h"

namespace allot::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using asio::use_awaitable;

namespace {

// Outgoing side of one agent connection, drained by one writer coroutine, because a WebSocket
// allows only one write in flight. Two queues: control (desired state, level-triggered: only the
// newest matters) and tunnel frames (a byte stream: never dropped, in order). Control goes first,
// so desired state waits behind at most one 64 KiB DATA frame; tunnel frames are bounded by each
// stream's credit window.
template <typename Ws>
class WsAgentLink final : public control::AgentLink {
 public:
  WsAgentLink(std::shared_ptr<Ws> ws) : ws_(std::move(ws)), wake_(ws_->get_executor()) {}

  // control::AgentLink
  void send(std::string message) override {
    if (closed_) return;
    control_ = std::move(message);
    wake_.cancel();
  }

  // A tunnel frame (binary), queued behind the earlier ones. Each stream's credit window bounds
  // what an honest agent lets queue here (it grants credit for what it has read); an agent that
  // grants credit and reads nothing would grow allotd's memory with every byte a session's user
  // sends, so past kMaxTunnelQueueBytes the connection ends and the agent must connect again.
  void sendTunnel(std::string frame) {
    if (closed_) return;
    tunnelBytes_ += frame.size();
    if (tunnelBytes_ > kMaxTunnelQueueBytes) {
      spdlog::warn("agent connection: {} bytes of tunnel frames wait unread; closing it",
                   tunnelBytes_);
      close();
      boost::system::error_code ec;
      beast::get_lowest_layer(*ws_).socket().close(ec);
      return;
    }
    tunnel_.push_back(std::move(frame));
    wake_.cancel();
    tellTunnelMux();
  }

  // The mux whose frames this carries, told how many wait (tunnel/tunnel_stream.h, backpressure).
  void useTunnelMux(std::weak_ptr<tunnel::TunnelMux> mux) { tunnelMux_ = std::move(mux); }

  asio::awaitable<void> writer() {
    auto self = ws_;  // keeps the stream alive while writing
    while (!closed_) {
      std::string msg;
      bool text = true;
      if (control_) {
        msg = std::move(*control_);
        control_.reset();
      } else if (!tunnel_.empty()) {
        msg = std::move(tunnel_.front());
        tunnel_.pop_front();
        tunnelBytes_ -= msg.size();
        tellTunnelMux();
        text = false;
      } else {
        wake_.expires_at(asio::steady_timer::time_point::max());
        co_await wake_.async_wait(asio::as_tuple(use_awaitable));
        continue;
      }
      ws_->text(text);
      auto [ec, n] = co_await ws_->async_write(asio::buffer(msg), asio::as_tuple(use_awaitable));
      if (ec) break;
    }
  }

  void close() {
    closed_ = true;
    tunnel_.clear();
    tunnelBytes_ = 0;
    wake_.cancel();
  }

 private:
  void tellTunnelMux() {
    if (auto mux = tunnelMux_.lock()) mux->linkQueued(tunnelBytes_);
  }

  // 256 full credit windows of 256 KiB. Streams hold their data from TunnelMux::kCongestedBytes
  // on, so only an agent that stops reading its socket lets the queue reach this.
  static constexpr size_t kMaxTunnelQueueBytes = 64u << 20;

  std::shared_ptr<Ws> ws_;
  asio::steady_timer wake_;
  std::optional<std::string> control_;
  std::deque<std::string> tunnel_;
  size_t tunnelBytes_ = 0;
  std::weak_ptr<tunnel::TunnelMux> tunnelMux_;
  bool closed_ = false;
};

// The writer coroutine owns a reference to its link, so the link outlives it.
template <typename Ws>
asio::awaitable<void> runWriter(std::shared_ptr<WsAgentLink<Ws>> link) {
  co_await link->writer();
}

// The GPUs a telemetry round reported, as far as it could be read (for the metrics of a refused
// one too).
size_t reportedGpus(const nlohmann::json& msg) {
  const auto gpus = msg.find("gpus");
  return gpus != msg.end() && gpus->is_array() ? gpus->size() : 0;
}

template <typename Stream>
asio::awaitable<void> serveAgent(Server& server, Stream stream, HttpRequest req) {
  using Ws = websocket::stream<Stream>;
  auto auth = req[http::field::authorization];
  std::optional<control::Principal> who;
  std::string credential;
  if (auth.size() > 7 && auth.substr(0, 7) == "Bearer ") {
    credential = std::string(auth.substr(7));
    who = server.cluster().access().authenticate(credential);
  }
  if (!who || who->kind != control::Principal::Kind::kHost) {
    auto res = ApiResponse::error(Status::Unauthenticated("agent stream needs a host credential"));
    http::response<http::string_body> out{res.status, req.version()};
    out.set(http::field::content_type, res.contentType);
    out.body() = res.body;
    out.prepare_payload();
    co_await http::async_write(stream, out, asio::as_tuple(use_awaitable));
    co_return;
  }
  const std::string host = who->name;
  const std::string credentialId = credential.substr(0, credential.find('_'));
  auto ws = std::make_shared<Ws>(std::move(stream));
  ws->set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  // The largest message an honest agent sends is a task result with two pieces of 256 KiB of
  // output, escaped, under this; a bigger frame would cost allotd tens of times its size to parse.
  ws->read_message_max(4 << 20);
  auto [aec] = co_await ws->async_accept(req, asio::as_tuple(use_awaitable));
  if (aec) co_return;

  auto link = std::make_shared<WsAgentLink<Ws>>(ws);
  std::shared_ptr<tunnel::TunnelMux> tunnels;  // from the hello on
  bool helloSeen = false;
  // What allotd refuses of this agent is logged throttled: its credential's holder chooses it.
  ThrottledWarnings refusals("agent " + host + ": ");
  beast::flat_buffer buf;
  for (;;) {
    buf.clear();
    auto [ec, n] = co_await ws->async_read(buf, asio::as_tuple(use_awaitable));
    if (ec) break;
    // A reset or a re-join deletes the credential while the stream is open; its hash was checked
    // once, above, so each message only looks its id up.
    if (!server.cluster().access().hostCredentialLive(credentialId, host)) {
      spdlog::warn("agent {}: its credential was revoked; closing its stream", host);
      break;
    }
    std::string data = beast::buffers_to_string(buf.data());
    if (!ws->got_text() && model::isTunnelFrame(data)) {
      if (tunnels) server.tunnels().onFrame(host, *tunnels, data);
      continue;
    }
    if (!ws->got_text()) {
      auto chunk = model::decodeLogChunk(data);
      if (!chunk.ok()) {
        refusals.warn("bad log frame: {}", chunk.status().message());
        continue;
      }
      auto st = server.cluster().agentLog(host, *chunk);
      if (!st.ok()) spdlog::debug("agent {}: log chunk dropped: {}", host, st.message());
      server.notifyJob(chunk->job);
      continue;
    }
    auto msg = parseBoundedJson(data);
    if (msg.is_discarded() || !msg.is_object()) {
      refusals.warn("malformed message dropped");
      continue;
    }
    const std::string type = protocol::messageType(msg);
    if (type == "hello" || type == "status")
      server.metrics().agentReport(host, model::refusedDesiredOf(msg));
    if (type == "images") {
      // The host's image cache (model/image_cache.h), once the connection said hello.
      auto report = model::imageReportFromJson(msg);
      if (!helloSeen || !report.ok()) {
        refusals.warn("image report refused: {}",
                      report.ok() ? "before hello" : report.status().message());
        continue;
      }
      auto change = server.cluster().imageCache().agentReport(host, std::move(report).value());
      co_await server.apply(change);
      continue;
    }
    // Whole or not at all (protocol/agent_messages.h): a report missing a job it could not read
    // would have allotd take that job for lost.
    auto decoded = protocol::decodeAgentMessage(msg);
    if (!decoded.ok()) {
      if (type == "telemetry") server.metrics().telemetryRound(reportedGpus(msg), false);
      refusals.warn("message refused: {}", decoded.status().message());
      // No hello, no service: the agent reconnects and says hello again.
      if (type == "hello") break;
      continue;
    }
    if (auto* t = std::get_if<model::Telemetry>(&*decoded)) {
      Status st = server.cluster().agentTelemetry(host, *t);
      server.metrics().telemetryRound(t->gpus.size(), st.ok());
      if (!st.ok()) {
        refusals.warn("telemetry rejected: {}", st.message());
        continue;
      }
      const auto sinceBoot = std::chrono::steady_clock::now().time_since_epoch();
      server.events().telemetryIngested(
          std::chrono::duration_cast<std::chrono::milliseconds>(sinceBoot).count());
      continue;
    }
    if (auto* hello = std::get_if<protocol::Hello>(&*decoded)) {
      // One hello a connection, as the agent sends: each commits the host and pushes its whole
      // desired state, so a stream of them would be a stream of commits on the I/O thread (a
      // review). A second one ends the connection; the agent reconnects and says hello again.
      if (helloSeen) {
        refusals.warn("a second hello on one connection; closing it");
        break;
      }
      asio::co_spawn(ws->get_executor(), runWriter<Ws>(link), asio::detached);
      std::weak_ptr<WsAgentLink<Ws>> weakLink = link;
      tunnels = server.tunnels().attach(host, [weakLink](std::string frame) {
        if (auto l = weakLink.lock()) l->sendTunnel(std::move(frame));
      });
      link->useTunnelMux(tunnels);
      helloSeen = true;
      auto change =
          server.cluster().agentConnected(host, link.get(), hello->inventory, hello->jobs);
      co_await server.apply(change);
      for (const auto& a : hello->jobs) server.notifyJob(a.id);
      continue;
    }
    if (!helloSeen) {
      // Reports, task output and results belong to a connection that said hello first.
      refusals.warn("unexpected message type '{}' before hello", type);
      continue;
    }
    if (auto* status = std::get_if<protocol::StatusReport>(&*decoded)) {
      auto change = server.cluster().agentStatus(host, status->jobs);
      co_await server.apply(change);
      for (const auto& a : status->jobs) server.notifyJob(a.id);
    } else if (auto* output = std::get_if<model::TaskOutput>(&*decoded)) {
      server.cluster().hosts().agentTaskOutput(host, *output);
    } else if (auto* result = std::get_if<model::HostTaskResult>(&*decoded)) {
      auto change = server.cluster().hosts().agentTaskResult(host, *result);
      co_await server.apply(change);
    }
  }
  link->close();
  if (tunnels) server.tunnels().detach(host, tunnels);
  server.cluster().agentDisconnected(host, link.get());
}

}  // namespace

asio::awaitable<void> serveAgentStream(Server& server, beast::tcp_stream stream, HttpRequest req) {
  co_await serveAgent(server, std::move(stream), std::move(req));
}

asio::awaitable<void> serveAgentStream(Server& server, beast::ssl_stream<beast::tcp_stream> stream,
                                       HttpRequest req) {
  co_await serveAgent(server, std::move(stream), std::move(req));
}

}  // namespace allot::api
