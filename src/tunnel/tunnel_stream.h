#pragma once
// Byte streams multiplexed over one agent WebSocket (docs/design/sessions.md, section 3.1), the
// part both ends share: a TunnelMux per connection routes tunnel frames to its TunnelStreams, and
// each stream keeps the per-direction credit window (model/tunnel_frame.h).
//
// Ownership: whoever uses a stream holds its shared_ptr; the mux only refers to streams weakly,
// so a stream dropped by its user is reset (RESET to the peer) and forgotten. Frames leave through
// a FrameSink, which appends to the connection's never-dropped tunnel FIFO.
//
// Backpressure: a stream's window bounds what it alone has in flight, but one user with many
// streams (many requests to a session at once) could queue their windows' sum on the connection,
// which allotd ends past 64 MiB, cutting every session of the host. So the connection's writer
// tells the mux how many bytes of tunnel frames wait (linkQueued), and from kCongestedBytes on
// every stream holds its next DATA frame until the queue is down to half of that. Frames that
// carry no data (OPEN, WINDOW, CLOSE, RESET) still go: they are small, and the peer's streams
// need them to go on.
//
// Threading: a mux and its streams live on one executor (allotd's and the agent's I/O contexts
// each run on one thread); every call, and every frame delivered, must come from that thread.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "common/status.h"
#include "model/tunnel_frame.h"

namespace allot::tunnel {

// Queues one frame (a binary WebSocket message) for the connection's writer. Never blocks.
using FrameSink = std::function<void(std::string frame)>;

class TunnelMux;

class TunnelStream : public std::enable_shared_from_this<TunnelStream> {
 public:
  ~TunnelStream();
  TunnelStream(const TunnelStream&) = delete;
  TunnelStream& operator=(const TunnelStream&) = delete;

  uint32_t id() const { return id_; }

  // Up to one DATA frame's bytes; "" once the peer closed its write side (and all was read); an
  // error once the stream was reset or its connection dropped. One reader at a time.
  boost::asio::awaitable<Result<std::string>> read();
  // Sends `bytes` as DATA frames of at most 64 KiB, each within the credit the peer granted:
  // waits for WINDOW when it runs out, and while the connection is congested. One writer at a
  // time.
  boost::asio::awaitable<Status> write(std::string bytes);
  // Half-close: tells the peer this side writes no more (CLOSE). Reading goes on.
  void closeWrite();
  // Ends the stream both ways at once (RESET to the peer, errors to local waiters).
  void reset(const std::string& reason = "reset");

  // Both sides closed their write side and everything was read, or the stream failed.
  bool finished() const;

 private:
  friend class TunnelMux;
  enum class Phase { kOpening, kOpen, kFailed };

  TunnelStream(std::shared_ptr<TunnelMux> mux, uint32_t id, Phase phase);

  // From the mux, for frames of this stream.
  void onFrame(const model::TunnelFrame& frame);
  // Fails the stream locally without telling the peer (it already knows, or is gone).
  void fail(Status why);
  // Waits (allotd side) for OPEN_OK or OPEN_FAIL, at most `timeout`.
  boost::asio::awaitable<Status> awaitOpen(std::chrono::milliseconds timeout);
  void markOpen();
  void send(std::string frame);

  std::weak_ptr<TunnelMux> mux_;
  const uint32_t id_;
  Phase phase_;
  Status error_;  // non-ok once failed/reset
  std::deque<std::string> inbox_;
  uint32_t recvCredit_ = model::kTunnelWindow;  // what the peer may still send us
  uint32_t sendCredit_ = model::kTunnelWindow;  // what we may still send the peer
  bool peerClosed_ = false;                     // CLOSE received
  bool writeClosed_ = false;                    // CLOSE sent
  boost::asio::steady_timer readWake_;
  boost::asio::steady_timer writeWake_;
};

class TunnelMux : public std::enable_shared_from_this<TunnelMux> {
 public:
  TunnelMux(boost::asio::any_io_executor ex, FrameSink sink);

  boost::asio::any_io_executor executor() const { return ex_; }

  // allotd: a new stream with the next id, OPEN sent; the caller awaits waitOpen().
  std::shared_ptr<TunnelStream> open(const model::TunnelOpen& what);
  static boost::asio::awaitable<Status> waitOpen(std::shared_ptr<TunnelStream> stream,
                                                 std::chrono::milliseconds timeout);
  // The agent: a stream for an OPEN from the peer; OPEN_OK is sent by accept(), OPEN_FAIL by
  // refuse() (which also forgets the stream).
  std::shared_ptr<TunnelStream> incoming(uint32_t id);
  void accept(TunnelStream& stream);
  void refuse(TunnelStream& stream, const std::string& reason);

  // A decoded frame from the peer. OPEN is the owner's business (see incoming()); frames for
  // unknown or forgotten streams are dropped.
  void deliver(const model::TunnelFrame& frame);
  // The connection dropped: every stream fails with `why`, and later frames are not sent.
  void shutdown(const std::string& why);

  // From the connection's writer: the bytes of tunnel frames queued and not yet written, after
  // each change.
  void linkQueued(size_t bytes);
  bool congested() const { return congested_; }
  static constexpr size_t kCongestedBytes = 8u << 20;
  bool down() const { return down_; }
  size_t streamCount() const { return streams_.size(); }

 private:
  friend class TunnelStream;
  void send(std::string frame);
  void forget(uint32_t id, const TunnelStream* stream);

  boost::asio::any_io_executor ex_;
  FrameSink sink_;
  std::map<uint32_t, std::weak_ptr<TunnelStream>> streams_;
  uint32_t nextId_ = 1;
  bool down_ = false;
  std::string downReason_;
  bool congested_ = false;
};

}  // namespace allot::tunnel
