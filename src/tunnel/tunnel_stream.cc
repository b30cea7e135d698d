#include "tunnel/tunnel_stream.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace allot::tunnel {

namespace asio = boost::asio;
using model::TunnelFrame;
using model::TunnelOp;

namespace {

// Sleeps until the timer is cancelled (the "wake" of the condition the caller re-checks). One
// thread runs the executor, so nothing can wake it between the caller's check and this wait.
asio::awaitable<void> sleepUntilWoken(asio::steady_timer& timer) {
  timer.expires_at(asio::steady_timer::time_point::max());
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

}  // namespace

TunnelStream::TunnelStream(std::shared_ptr<TunnelMux> mux, uint32_t id, Phase phase)
    : mux_(mux), id_(id), phase_(phase), readWake_(mux->executor()), writeWake_(mux->executor()) {}

TunnelStream::~TunnelStream() {
  // Dropped by its user while still in use: the peer must not keep its end open.
  if (error_.ok() && phase_ != Phase::kFailed && !(writeClosed_ && peerClosed_))
    send(model::tunnelSimpleFrame(TunnelOp::kReset, id_, "stream dropped"));
  if (auto mux = mux_.lock()) mux->forget(id_, this);
}

bool TunnelStream::finished() const {
  return !error_.ok() || (writeClosed_ && peerClosed_ && inbox_.empty());
}

void TunnelStream::send(std::string frame) {
  if (auto mux = mux_.lock()) mux->send(std::move(frame));
}

asio::awaitable<Result<std::string>> TunnelStream::read() {
  auto self = shared_from_this();  // the caller may drop its reference while this waits
  for (;;) {
    if (!inbox_.empty()) {
      std::string chunk = std::move(inbox_.front());
      inbox_.pop_front();
      // Consumed: the peer may send that much more.
      recvCredit_ += static_cast<uint32_t>(chunk.size());
      send(model::tunnelWindowFrame(id_, static_cast<uint32_t>(chunk.size())));
      if (finished())
        if (auto mux = mux_.lock()) mux->forget(id_, this);
      co_return chunk;
    }
    if (!error_.ok()) co_return error_;
    if (peerClosed_) co_return std::string();
    co_await sleepUntilWoken(readWake_);
  }
}

asio::awaitable<Status> TunnelStream::write(std::string bytes) {
  auto self = shared_from_this();
  size_t off = 0;
  while (off < bytes.size()) {
    if (!error_.ok()) co_return error_;
    if (writeClosed_)
      co_return Status::FailedPrecondition("tunnel stream " + std::to_string(id_) +
                                           ": write after close");
    if (phase_ != Phase::kOpen)
      co_return Status::FailedPrecondition("tunnel stream " + std::to_string(id_) + " is not open");
    // Not held while this waits: the mux's owner drops it when the connection ends.
    const bool congested = [this] {
      const auto mux = mux_.lock();
      return mux && mux->congested();
    }();
    if (sendCredit_ == 0 || congested) {
      co_await sleepUntilWoken(writeWake_);
      continue;
    }
    const size_t n =
        std::min({bytes.size() - off, model::kMaxTunnelData, static_cast<size_t>(sendCredit_)});
    send(model::tunnelDataFrame(id_, std::string_view(bytes).substr(off, n)));
    sendCredit_ -= static_cast<uint32_t>(n);
    off += n;
  }
  co_return Status::Ok();
}

void TunnelStream::closeWrite() {
  if (writeClosed_ || !error_.ok() || phase_ != Phase::kOpen) return;
  writeClosed_ = true;
  send(model::tunnelSimpleFrame(TunnelOp::kClose, id_));
  writeWake_.cancel();
  if (finished())
    if (auto mux = mux_.lock()) mux->forget(id_, this);
}

void TunnelStream::reset(const std::string& reason) {
  if (!error_.ok()) return;
  send(model::tunnelSimpleFrame(TunnelOp::kReset, id_, reason));
  fail(Status::Unavailable("tunnel stream " + std::to_string(id_) + " reset: " + reason));
}

void TunnelStream::fail(Status why) {
  if (!error_.ok()) return;
  error_ = std::move(why);
  phase_ = Phase::kFailed;
  inbox_.clear();
  readWake_.cancel();
  writeWake_.cancel();
  if (auto mux = mux_.lock()) mux->forget(id_, this);
}

void TunnelStream::markOpen() {
  if (phase_ != Phase::kOpening) return;
  phase_ = Phase::kOpen;
  readWake_.cancel();
}

void TunnelStream::onFrame(const TunnelFrame& f) {
  if (!error_.ok()) return;
  const std::string name = "tunnel stream " + std::to_string(id_);
  auto violation = [&](const std::string& what) { reset("protocol violation: " + what); };
  switch (f.op) {
    case TunnelOp::kOpenOk:
      markOpen();
      return;
    case TunnelOp::kOpenFail:
      if (phase_ == Phase::kOpening) fail(Status::Unavailable(f.payload));
      return;
    case TunnelOp::kData:
      if (phase_ != Phase::kOpen) return violation("DATA before OPEN_OK");
      if (peerClosed_) return violation("DATA after CLOSE");
      if (f.payload.size() > recvCredit_) return violation("DATA beyond the granted window");
      if (f.payload.empty()) return;  // "" means end of stream to a reader
      recvCredit_ -= static_cast<uint32_t>(f.payload.size());
      inbox_.push_back(f.payload);
      readWake_.cancel();
      return;
    case TunnelOp::kWindow: {
      const uint64_t credit = static_cast<uint64_t>(sendCredit_) + model::tunnelWindowCredit(f);
      if (credit > model::kTunnelWindow) return violation("WINDOW beyond the initial window");
      sendCredit_ = static_cast<uint32_t>(credit);
      writeWake_.cancel();
      return;
    }
    case TunnelOp::kClose:
      peerClosed_ = true;
      readWake_.cancel();
      if (finished())
        if (auto mux = mux_.lock()) mux->forget(id_, this);
      return;
    case TunnelOp::kReset:
      fail(Status::Unavailable(name + " reset by the peer: " + f.payload));
      return;
    case TunnelOp::kOpen:
      return;  // the mux's owner handles OPEN
  }
}

asio::awaitable<Status> TunnelStream::awaitOpen(std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  readWake_.expires_after(timeout);
  while (phase_ == Phase::kOpening) {
    auto [ec] = co_await readWake_.async_wait(asio::as_tuple(asio::use_awaitable));
    // A cancel is a wake (the phase is checked again); an expiry is the deadline.
    if (!ec && phase_ == Phase::kOpening) {
      reset("open timed out");
      co_return Status::Unavailable("no answer to OPEN within " + std::to_string(timeout.count()) +
                                    " ms");
    }
  }
  co_return error_;
}

TunnelMux::TunnelMux(asio::any_io_executor ex, FrameSink sink)
    : ex_(std::move(ex)), sink_(std::move(sink)) {}

void TunnelMux::send(std::string frame) {
  if (!down_) sink_(std::move(frame));
}

void TunnelMux::forget(uint32_t id, const TunnelStream* stream) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  auto live = it->second.lock();
  if (!live || live.get() == stream) streams_.erase(it);
}

std::shared_ptr<TunnelStream> TunnelMux::open(const model::TunnelOpen& what) {
  const uint32_t id = nextId_++;
  std::shared_ptr<TunnelStream> s(
      new TunnelStream(shared_from_this(), id, TunnelStream::Phase::kOpening));
  if (down_) {
    s->fail(Status::Unavailable(downReason_));
    return s;
  }
  streams_[id] = s;
  send(model::tunnelOpenFrame(id, what));
  return s;
}

asio::awaitable<Status> TunnelMux::waitOpen(std::shared_ptr<TunnelStream> stream,
                                            std::chrono::milliseconds timeout) {
  auto waiting = stream->awaitOpen(timeout);
  co_return co_await std::move(waiting);
}

std::shared_ptr<TunnelStream> TunnelMux::incoming(uint32_t id) {
  std::shared_ptr<TunnelStream> s(
      new TunnelStream(shared_from_this(), id, TunnelStream::Phase::kOpening));
  if (down_) {
    s->fail(Status::Unavailable(downReason_));
    return s;
  }
  // A second OPEN for a live id: the old stream cannot be told apart from the new one any more.
  if (auto old = streams_.find(id); old != streams_.end())
    if (auto prev = old->second.lock()) prev->fail(Status::Unavailable("stream id reused"));
  streams_[id] = s;
  return s;
}

void TunnelMux::accept(TunnelStream& stream) {
  if (!stream.error_.ok()) return;
  send(model::tunnelSimpleFrame(TunnelOp::kOpenOk, stream.id()));
  stream.markOpen();
}

void TunnelMux::refuse(TunnelStream& stream, const std::string& reason) {
  if (stream.error_.ok()) send(model::tunnelSimpleFrame(TunnelOp::kOpenFail, stream.id(), reason));
  stream.fail(Status::Unavailable(reason));
}

void TunnelMux::deliver(const model::TunnelFrame& frame) {
  auto it = streams_.find(frame.stream);
  if (it == streams_.end()) return;
  auto s = it->second.lock();
  if (!s) {
    streams_.erase(it);
    return;
  }
  s->onFrame(frame);
}

void TunnelMux::linkQueued(size_t bytes) {
  if (!congested_) {
    congested_ = bytes >= kCongestedBytes;
    return;
  }
  if (bytes > kCongestedBytes / 2) return;
  congested_ = false;
  // Every writer re-checks: the first ones fill the queue again, and the rest wait once more.
  for (auto& [id, weak] : streams_)
    if (auto s = weak.lock()) s->writeWake_.cancel();
}

void TunnelMux::shutdown(const std::string& why) {
  if (down_) return;
  down_ = true;
  downReason_ = why;
  auto streams = std::move(streams_);
  streams_.clear();
  for (auto& [id, weak] : streams)
    if (auto s = weak.lock()) s->fail(Status::Unavailable(why));
}

}  // namespace allot::tunnel
