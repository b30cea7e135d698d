// The tunnel end to end: allotd's TunnelHub and the agent's TunnelEndpoint talk over a real
// loopback WebSocket (Beast on both sides, each written by an AgentOutbox), and the agent connects
// streams to a real Unix-socket echo server in a temporary directory (or to /bin/cat).
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <filesystem>
#include <functional>
#include <utility>

#include "agent/runtime/agent_outbox.h"
#include "agent/runtime/tunnel_endpoint.h"
#include "agent/test_dirs.h"
#include "api/tunnel_hub.h"
#include "model/tunnel_frame.h"

namespace allot::agent {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using asio::as_tuple;
using asio::use_awaitable;
using Ws = websocket::stream<beast::tcp_stream>;
using Local = asio::local::stream_protocol;
using tunnel::TunnelStream;

// ASSERT_* returns, which a coroutine cannot.
#define CO_ASSERT(cond)                          \
  if (!(cond)) {                                 \
    ADD_FAILURE() << "assertion failed: " #cond; \
    co_return;                                   \
  }

std::string pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

// Waits for a condition (polled), never for a fixed time.
asio::awaitable<void> waitFor(std::function<bool()> cond) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  while (!cond()) {
    t.expires_after(std::chrono::milliseconds(2));
    co_await t.async_wait(asio::as_tuple(use_awaitable));
  }
}

class TunnelTest : public testdirs::TempDirTest {
 protected:
  TunnelTest() : TempDirTest("tunnel") {}
  void SetUp() override {
    TempDirTest::SetUp();
    echoPath_ = dir_ + "/echo.sock";
  }

  Result<TunnelTarget> resolve(int64_t session, const std::string& target) {
    if (session == 1 && target == "echo") return TunnelTarget::unixSocket(echoPath_);
    if (session == 1 && target == "cat") return TunnelTarget::process({"/bin/cat"});
    return refuseAllTunnels(session, target);
  }

  // Echoes each connection's bytes; at EOF shuts its write side (half-close both ways).
  asio::awaitable<void> echoServer() {
    auto ex = co_await asio::this_coro::executor;
    Local::acceptor acceptor(ex, Local::endpoint(echoPath_));
    echoListening_ = true;
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(use_awaitable));
      if (ec) co_return;
      asio::co_spawn(ex, echoOne(std::move(socket)), asio::detached);
    }
  }
  asio::awaitable<void> echoOne(Local::socket socket) {
    ++echoOpen_;
    std::string buf(16 * 1024, '\0');
    for (;;) {
      auto [ec, n] = co_await socket.async_read_some(asio::buffer(buf), as_tuple(use_awaitable));
      if (ec) break;
      auto [wec, wn] =
          co_await asio::async_write(socket, asio::buffer(buf.data(), n), as_tuple(use_awaitable));
      if (wec) break;
    }
    boost::system::error_code ignored;
    socket.shutdown(Local::socket::shutdown_send, ignored);
    --echoOpen_;
  }

  // Hands each tunnel frame read from `ws` to `onFrame` until the connection ends.
  static asio::awaitable<void> readTunnelFrames(Ws& ws,
                                                std::function<void(const std::string&)> onFrame) {
    beast::flat_buffer buf;
    for (;;) {
      buf.clear();
      auto [ec, n] = co_await ws.async_read(buf, as_tuple(use_awaitable));
      if (ec) break;
      std::string data = beast::buffers_to_string(buf.data());
      if (model::isTunnelFrame(data)) onFrame(data);
    }
  }

  // allotd's side of the connection: frames to the hub, the hub's frames out.
  asio::awaitable<void> serverSide(std::shared_ptr<Ws> ws) {
    auto ex = co_await asio::this_coro::executor;
    auto outbox = std::make_shared<AgentOutbox<Ws>>(ws);
    asio::co_spawn(ex, outbox->run(), asio::detached);
    auto mux = hub_.attach("h1", [outbox](std::string f) { outbox->pushTunnel(std::move(f)); });
    co_await readTunnelFrames(
        *ws, [this, &mux](const std::string& frame) { hub_.onFrame("h1", *mux, frame); });
    hub_.detach("h1", mux);
    outbox->stop();
  }

  // The agent's side: frames to the endpoint, the endpoint's frames out.
  asio::awaitable<void> clientSide(std::shared_ptr<Ws> ws) {
    auto ex = co_await asio::this_coro::executor;
    auto outbox = std::make_shared<AgentOutbox<Ws>>(ws);
    asio::co_spawn(ex, outbox->run(), asio::detached);
    endpoint_ = std::make_unique<TunnelEndpoint>(
        ex, [outbox](std::string f) { outbox->pushTunnel(std::move(f)); },
        [this](int64_t s, const std::string& t) { return resolve(s, t); });
    co_await readTunnelFrames(*ws, [this](const std::string& frame) { endpoint_->onFrame(frame); });
    endpoint_->shutdown();
    outbox->stop();
    clientDone_ = true;
  }

  // Echo server, then a WebSocket between the two sides, then `body`.
  asio::awaitable<void> setUpConnection() {
    auto ex = co_await asio::this_coro::executor;
    asio::co_spawn(ex, echoServer(), asio::detached);
    co_await waitFor([this] { return echoListening_; });
    asio::ip::tcp::acceptor acceptor(ex, {asio::ip::address_v4::loopback(), 0});
    auto server = std::make_shared<Ws>(ex);
    client_ = std::make_shared<Ws>(ex);
    auto [cec] = co_await beast::get_lowest_layer(*client_).async_connect(acceptor.local_endpoint(),
                                                                          as_tuple(use_awaitable));
    CO_ASSERT(!cec);
    auto [aec, socket] = co_await acceptor.async_accept(as_tuple(use_awaitable));
    CO_ASSERT(!aec);
    beast::get_lowest_layer(*server).socket() = std::move(socket);
    bool accepted = false;
    asio::co_spawn(
        ex,
        [server, &accepted]() -> asio::awaitable<void> {
          auto [ec] = co_await server->async_accept(as_tuple(use_awaitable));
          accepted = !ec;
        },
        asio::detached);
    auto [hec] = co_await client_->async_handshake("127.0.0.1", "/api/v1/agent/stream",
                                                   as_tuple(use_awaitable));
    CO_ASSERT(!hec);
    co_await waitFor([&] { return accepted; });
    asio::co_spawn(ex, serverSide(server), asio::detached);
    asio::co_spawn(ex, clientSide(client_), asio::detached);
    co_await waitFor([this] { return hub_.connected("h1") && endpoint_ != nullptr; });
  }

  // Runs `body` after setting the connection up; a hang fails the test instead of blocking it.
  void run(std::function<asio::awaitable<void>()> body) {
    bool done = false;
    asio::co_spawn(
        io_,
        [&]() -> asio::awaitable<void> {
          co_await setUpConnection();
          co_await body();
        },
        [&](std::exception_ptr e) {
          done = true;
          if (e) ADD_FAILURE() << "test coroutine threw";
        });
    asio::steady_timer guard(io_, std::chrono::seconds(120));
    guard.async_wait([&](boost::system::error_code ec) {
      if (!ec) ADD_FAILURE() << "test hung";
      io_.stop();
    });
    while (!done && !io_.stopped()) io_.run_one();
    guard.cancel();
    boost::system::error_code ignored;
    if (client_) beast::get_lowest_layer(*client_).socket().close(ignored);
    io_.restart();
    io_.run_for(std::chrono::milliseconds(200));  // lets both sides see the close; not asserted
  }

  // A stream to session 1's echo; null, with the reason as a failure, when it cannot be opened.
  asio::awaitable<std::shared_ptr<TunnelStream>> openEcho() {
    auto opened = co_await hub_.open("h1", 1, "echo");
    if (!opened.ok()) ADD_FAILURE() << opened.status().message();
    co_return opened.ok() ? *opened : nullptr;
  }

  // Writes `bytes` to the stream and says how that went.
  static asio::awaitable<Status> write(std::shared_ptr<TunnelStream> s, std::string bytes) {
    auto writing = s->write(std::move(bytes));
    co_return co_await std::move(writing);
  }

  // Writes `bytes` then half-closes; reads until the peer's half-close; returns what it read.
  static asio::awaitable<std::string> roundTrip(std::shared_ptr<TunnelStream> s,
                                                std::string bytes) {
    auto ex = co_await asio::this_coro::executor;
    bool writeOk = false;
    asio::co_spawn(
        ex,
        [s, bytes = std::move(bytes), &writeOk]() -> asio::awaitable<void> {
          auto writing = s->write(bytes);
          Status st = co_await std::move(writing);
          writeOk = st.ok();
          s->closeWrite();
        },
        asio::detached);
    std::string got;
    for (;;) {
      auto r = co_await s->read();
      if (!r.ok()) {
        ADD_FAILURE() << r.status().message();
        break;
      }
      if (r->empty()) break;
      EXPECT_LE(r->size(), model::kMaxTunnelData);
      got += *r;
    }
    EXPECT_TRUE(writeOk);
    co_return got;
  }

  asio::io_context io_;
  api::TunnelHub hub_{io_.get_executor()};
  std::unique_ptr<TunnelEndpoint> endpoint_;
  std::shared_ptr<Ws> client_;
  std::string echoPath_;
  bool echoListening_ = false;
  int echoOpen_ = 0;
  bool clientDone_ = false;
};

TEST_F(TunnelTest, CarriesMegabytesBothWaysIntactAndHalfCloses) {
  run([this]() -> asio::awaitable<void> {
    auto s = co_await openEcho();
    CO_ASSERT(s);
    const std::string sent = pattern(3 * 1024 * 1024 + 12345, 1);
    auto trip = roundTrip(s, sent);
    std::string got = co_await std::move(trip);
    EXPECT_EQ(got.size(), sent.size());
    EXPECT_TRUE(got == sent) << "bytes differ";
    // Both sides closed their write side: the stream is over, and writing is refused.
    EXPECT_TRUE(s->finished());
    auto late = s->write("late");
    Status st = co_await std::move(late);
    EXPECT_FALSE(st.ok());
    co_await waitFor([this] { return echoOpen_ == 0; });
  });
}

TEST_F(TunnelTest, HalfCloseKeepsTheOtherDirectionOpen) {
  run([this]() -> asio::awaitable<void> {
    auto s = co_await openEcho();
    CO_ASSERT(s);
    Status st = co_await write(s, "ping");
    CO_ASSERT(st.ok());
    s->closeWrite();
    // After our CLOSE the echo still answers, then closes its side: "" is the end of stream.
    std::string got;
    for (;;) {
      auto r = co_await s->read();
      CO_ASSERT(r.ok());
      if (r->empty()) break;
      got += *r;
    }
    EXPECT_EQ(got, "ping");
  });
}

TEST_F(TunnelTest, ProcessTargetIsTheStreamsStdinAndStdout) {
  run([this]() -> asio::awaitable<void> {
    auto opened = co_await hub_.open("h1", 1, "cat");
    CO_ASSERT(opened.ok());
    const std::string sent = pattern(700 * 1024, 2);
    auto trip = roundTrip(*opened, sent);
    std::string got = co_await std::move(trip);
    EXPECT_TRUE(got == sent) << "got " << got.size() << " bytes of " << sent.size();
  });
}

TEST_F(TunnelTest, UnknownSessionIsRefusedWithTheAgentsReason) {
  run([this]() -> asio::awaitable<void> {
    auto opened = co_await hub_.open("h1", 99, "echo");
    CO_ASSERT(!opened.ok());
    EXPECT_NE(opened.status().message().find("no such session 99"), std::string::npos)
        << opened.status().message();
    auto other = co_await hub_.open("h2", 1, "echo");
    CO_ASSERT(!other.ok());
    EXPECT_NE(other.status().message().find("not connected"), std::string::npos);
    // The refusal left nothing behind on either side; the connection still works.
    EXPECT_EQ(endpoint_->streamCount(), 0u);
    auto ok = co_await hub_.open("h1", 1, "echo");
    EXPECT_TRUE(ok.ok());
  });
}

TEST_F(TunnelTest, DroppedWebSocketResetsEveryStream) {
  run([this]() -> asio::awaitable<void> {
    auto s = co_await openEcho();
    CO_ASSERT(s);
    Status st = co_await write(s, "x");
    CO_ASSERT(st.ok());
    auto first = co_await s->read();
    CO_ASSERT(first.ok() && *first == "x");
    CO_ASSERT(echoOpen_ == 1);

    boost::system::error_code ignored;
    beast::get_lowest_layer(*client_).socket().close(ignored);

    // allotd's side: the pending read fails, the host is gone from the hub.
    auto r = co_await s->read();
    EXPECT_FALSE(r.ok());
    co_await waitFor([this] { return !hub_.connected("h1"); });
    auto again = co_await hub_.open("h1", 1, "echo");
    EXPECT_FALSE(again.ok());
    // The agent's side: its stream is gone and the target connection closed.
    co_await waitFor([this] { return clientDone_ && echoOpen_ == 0; });
    EXPECT_EQ(endpoint_->streamCount(), 0u);
  });
}

TEST_F(TunnelTest, AReaderThatStopsStallsOnlyItsOwnStream) {
  run([this]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto stalled = co_await openEcho();
    CO_ASSERT(stalled);
    // Nobody reads `stalled`: its echo fills the windows and socket buffers and then its writer
    // waits for credit, with no more than a window of it queued anywhere.
    bool stalledWriteDone = false;
    asio::co_spawn(
        ex,
        [stalled, &stalledWriteDone]() -> asio::awaitable<void> {
          auto writing = stalled->write(pattern(32 * 1024 * 1024, 3));
          Status st = co_await std::move(writing);
          stalledWriteDone = true;
        },
        asio::detached);

    auto other = co_await openEcho();
    CO_ASSERT(other);
    const std::string sent = pattern(1024 * 1024, 4);
    auto trip = roundTrip(other, sent);
    std::string got = co_await std::move(trip);
    EXPECT_TRUE(got == sent) << "got " << got.size() << " bytes of " << sent.size();
    EXPECT_FALSE(stalledWriteDone) << "32 MiB went out although nobody read the echo";
    stalled->reset("test over");
    co_await waitFor([&] { return stalledWriteDone; });
  });
}

// A WebSocket stand-in that records what the outbox writes, completing each write on the next
// turn of the executor as a socket would.
class RecordingWs {
 public:
  explicit RecordingWs(asio::any_io_executor ex) : ex_(std::move(ex)) {}
  asio::any_io_executor get_executor() { return ex_; }
  void binary(bool b) { binary_ = b; }
  template <typename Token>
  auto async_write(asio::const_buffer buf, Token&& token) {
    written.push_back((binary_ ? "bin:" : "text:") +
                      std::string(static_cast<const char*>(buf.data()), buf.size()));
    return asio::async_initiate<Token, void(boost::system::error_code, size_t)>(
        [this, n = buf.size()](auto handler) {
          asio::post(ex_, [handler = std::move(handler), n]() mutable {
            std::move(handler)(boost::system::error_code{}, n);
          });
        },
        token);
  }
  std::vector<std::string> written;

 private:
  asio::any_io_executor ex_;
  bool binary_ = false;
};

// Attack: one session's user sends many requests at once. Each stream's window bounds what it
// has in flight, but 64 of them together queued 16 MiB on the host's connection, and a few
// hundred would pass allotd's 64 MiB limit, which ends the connection and every session of the
// host with it. Now the streams hold their data while the connection is congested, and the queue
// stays near TunnelMux::kCongestedBytes however many there are; once it drains, every write ends.
TEST(TunnelMuxTest, StreamsHoldTheirDataWhileTheConnectionIsCongested) {
  asio::io_context io;
  std::deque<std::string> queue;  // the connection's frames, written as the test says
  size_t queued = 0;
  size_t mostQueued = 0;
  std::shared_ptr<tunnel::TunnelMux> mux;
  mux = std::make_shared<tunnel::TunnelMux>(io.get_executor(), [&](std::string frame) {
    queued += frame.size();
    mostQueued = std::max(mostQueued, queued);
    queue.push_back(std::move(frame));
    mux->linkQueued(queued);
  });
  constexpr int kStreams = 64;
  std::vector<std::shared_ptr<TunnelStream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(mux->open({1, "echo"}));
    mux->deliver({model::TunnelOp::kOpenOk, streams.back()->id(), ""});
  }
  int written = 0;
  for (auto& stream : streams)
    asio::co_spawn(
        io,
        [&, stream]() -> asio::awaitable<void> {
          Status st = co_await stream->write(pattern(model::kTunnelWindow, stream->id()));
          EXPECT_TRUE(st.ok()) << st.toString();
          ++written;
        },
        asio::detached);
  // The writers run until all of them wait; then the connection's writer drains a frame at a
  // time, as the agent reads.
  size_t dataBytes = 0;
  for (;;) {
    while (io.poll() > 0) {
    }
    if (queue.empty()) break;
    auto frame = model::decodeTunnelFrame(queue.front());
    ASSERT_TRUE(frame.ok());
    if (frame->op == model::TunnelOp::kData) dataBytes += frame->payload.size();
    queued -= queue.front().size();
    queue.pop_front();
    mux->linkQueued(queued);
  }
  EXPECT_EQ(written, kStreams);
  EXPECT_EQ(dataBytes, size_t{kStreams} * model::kTunnelWindow);
  // At most one DATA frame past the mark, and the OPENs before it.
  EXPECT_LE(mostQueued, tunnel::TunnelMux::kCongestedBytes + model::kMaxTunnelData + 64 * 1024);
  EXPECT_GT(mostQueued, tunnel::TunnelMux::kCongestedBytes / 2);
}

TEST(AgentOutboxTest, ControlInOrderBeforeTunnelFramesWhichAreNeverDropped) {
  asio::io_context io;
  auto ws = std::make_shared<RecordingWs>(io.get_executor());
  auto outbox = std::make_shared<AgentOutbox<RecordingWs>>(ws);
  outbox->pushTunnel("t1");
  outbox->push("status", false);
  outbox->pushTunnel("t2");
  outbox->push("log", true);
  bool drained = false;
  asio::co_spawn(io, outbox->run(), asio::detached);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        drained = co_await outbox->drained();
        outbox->push("telemetry", false);
        outbox->pushTunnel("t3");
        drained = drained && co_await outbox->drained();
      },
      asio::detached);
  // The writer sleeps when it has nothing left; run until it wrote all six, then end it.
  while (ws->written.size() < 6 && io.run_one() > 0) {
  }
  outbox->stop();
  io.run();
  EXPECT_TRUE(drained);
  EXPECT_EQ(ws->written, (std::vector<std::string>{"text:status", "bin:log", "bin:t1",
                                                   "text:telemetry", "bin:t2", "bin:t3"}));
}

}  // namespace
}  // namespace allot::agent
