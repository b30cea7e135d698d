#pragma once
// TunnelHub: allotd's end of the byte tunnels to agents' hosts (docs/design/sessions.md, 3.1).
// One TunnelMux per connected agent, attached by the agent stream after its hello and detached
// when the connection ends (every stream on it then fails). Callers open streams by host name;
// the agent maps (session, target) to what it connects the stream to, never allotd.
//
// Owned by Server; everything runs on allotd's I/O thread (Server runs its io_context on one
// thread), so no locking.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"
#include "tunnel/tunnel_stream.h"

namespace allot::api {

using tunnel::TunnelStream;

class TunnelHub {
 public:
  static constexpr std::chrono::milliseconds kOpenTimeout{10'000};

  explicit TunnelHub(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}

  // A connected agent's frames leave through `sink` (its link's tunnel FIFO). Replaces (and shuts
  // down) an older mux of the same host.
  std::shared_ptr<tunnel::TunnelMux> attach(const std::string& host, tunnel::FrameSink sink);
  // The connection of `mux` ended; its streams fail. A newer connection of the host stays.
  void detach(const std::string& host, const std::shared_ptr<tunnel::TunnelMux>& mux);
  // A binary message from the agent that isTunnelFrame(); a bad frame is logged and dropped.
  void onFrame(const std::string& host, tunnel::TunnelMux& mux, std::string_view message);

  // Opens a stream to `target` of `session` on `host`: waits for the agent's OPEN_OK, or fails
  // with its OPEN_FAIL reason, with Unavailable when the host is not connected, or after timeout.
  boost::asio::awaitable<Result<std::shared_ptr<TunnelStream>>> open(
      const std::string& host, int64_t session, const std::string& target,
      std::chrono::milliseconds timeout = kOpenTimeout);

  bool connected(const std::string& host) const { return muxes_.count(host) > 0; }

 private:
  boost::asio::any_io_executor ex_;
  std::map<std::string, std::shared_ptr<tunnel::TunnelMux>> muxes_;
};

}  // namespace allot::api
