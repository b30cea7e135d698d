#pragma once
// AgentOutbox: the one writer of an agent connection's WebSocket (a WebSocket allows one write in
// flight). Two FIFOs: control messages (hello aside: status, telemetry, task output and result,
// log chunks, in the order queued) and tunnel frames (whose bytes it tells the tunnel mux, for
// backpressure). The writer wakes when either gets one, so a tunnel DATA frame leaves at once
// rather than on the next tick, and drains control first, so a status waits behind at most one
// 64 KiB tunnel frame. Tunnel frames are bounded by each stream's
// credit window; control producers bound themselves by awaiting drained() (the socket's
// backpressure, as when they wrote themselves).
//
// Shared by the connection's coroutines (the writer holds a reference); agent I/O thread only.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "tunnel/tunnel_stream.h"

namespace allot::agent {

template <typename Ws>
class AgentOutbox : public std::enable_shared_from_this<AgentOutbox<Ws>> {
 public:
  explicit AgentOutbox(std::shared_ptr<Ws> ws)
      : ws_(std::move(ws)), wake_(ws_->get_executor()), drainedWake_(ws_->get_executor()) {}

  void push(std::string message, bool binary) {
    if (done_) return;
    control_.push_back({std::move(message), binary});
    wake_.cancel();
  }
  void pushTunnel(std::string frame) {
    if (done_) return;
    tunnelBytes_ += frame.size();
    tunnel_.push_back(std::move(frame));
    wake_.cancel();
    tellTunnelMux();
  }
  // The mux whose frames this carries, told how many wait (tunnel/tunnel_stream.h, backpressure).
  void useTunnelMux(std::weak_ptr<tunnel::TunnelMux> mux) { tunnelMux_ = std::move(mux); }
  // Waits until every queued control message is written; false once a write failed.
  boost::asio::awaitable<bool> drained() {
    auto self = this->shared_from_this();
    while (!done_ && (!control_.empty() || writingControl_)) co_await sleep(drainedWake_);
    co_return !failed_;
  }
  bool failed() const { return failed_; }
  // The connection is over: the writer ends and queued messages are dropped.
  void stop() {
    done_ = true;
    control_.clear();
    tunnel_.clear();
    tunnelBytes_ = 0;
    wake_.cancel();
    drainedWake_.cancel();
  }

  boost::asio::awaitable<void> run() {
    auto self = this->shared_from_this();
    auto ws = ws_;
    while (!done_) {
      std::string msg;
      bool binary = true;
      if (!control_.empty()) {
        msg = std::move(control_.front().message);
        binary = control_.front().binary;
        control_.pop_front();
        writingControl_ = true;
      } else if (!tunnel_.empty()) {
        msg = std::move(tunnel_.front());
        tunnel_.pop_front();
        tunnelBytes_ -= msg.size();
        tellTunnelMux();
      } else {
        co_await sleep(wake_);
        continue;
      }
      ws->binary(binary);
      auto [ec, n] = co_await ws->async_write(boost::asio::buffer(msg),
                                              boost::asio::as_tuple(boost::asio::use_awaitable));
      writingControl_ = false;
      if (ec) {
        failed_ = true;
        stop();
      }
      if (control_.empty()) drainedWake_.cancel();
    }
  }

 private:
  struct Message {
    std::string message;
    bool binary = false;
  };

  // Sleeps until the timer is cancelled; the caller re-checks its condition (one thread, so no
  // wake is lost between the check and the wait).
  static boost::asio::awaitable<void> sleep(boost::asio::steady_timer& timer) {
    timer.expires_at(boost::asio::steady_timer::time_point::max());
    co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
  }

  void tellTunnelMux() {
    if (auto mux = tunnelMux_.lock()) mux->linkQueued(tunnelBytes_);
  }

  std::shared_ptr<Ws> ws_;
  boost::asio::steady_timer wake_;
  boost::asio::steady_timer drainedWake_;
  std::deque<Message> control_;
  std::deque<std::string> tunnel_;
  size_t tunnelBytes_ = 0;
  std::weak_ptr<tunnel::TunnelMux> tunnelMux_;
  bool writingControl_ = false;
  bool failed_ = false;
  bool done_ = false;
};

}  // namespace allot::agent
