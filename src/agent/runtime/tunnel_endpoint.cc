#include "agent/runtime/tunnel_endpoint.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>
#include <tuple>

#include "agent/exec/run_as.h"

namespace allot::agent {

namespace asio = boost::asio;
using asio::use_awaitable;
using boost::system::error_code;
using tunnel::TunnelMux;
using tunnel::TunnelStream;

namespace {

// The target end of one stream. Closed when the last pump lets go of it.
class TargetConn {
 public:
  virtual ~TargetConn() = default;
  virtual asio::awaitable<std::tuple<error_code, size_t>> readSome(asio::mutable_buffer buf) = 0;
  virtual asio::awaitable<error_code> writeAll(asio::const_buffer buf) = 0;
  virtual void shutdownWrite() = 0;
  virtual void close() = 0;
};

template <typename Socket>
class SocketConn : public TargetConn {
 public:
  explicit SocketConn(Socket socket) : socket_(std::move(socket)) {}
  ~SocketConn() override { SocketConn::close(); }

  asio::awaitable<std::tuple<error_code, size_t>> readSome(asio::mutable_buffer buf) override {
    co_return co_await socket_.async_read_some(buf, asio::as_tuple(use_awaitable));
  }
  asio::awaitable<error_code> writeAll(asio::const_buffer buf) override {
    auto [ec, n] = co_await asio::async_write(socket_, buf, asio::as_tuple(use_awaitable));
    co_return ec;
  }
  void shutdownWrite() override {
    error_code ignored;
    socket_.shutdown(Socket::shutdown_send, ignored);
  }
  void close() override {
    error_code ignored;
    socket_.close(ignored);
  }

 protected:
  Socket socket_;
};

// Reaps a process whose stream ended: it should exit once its stdin closes; it gets 5 s before
// SIGKILL, so that a stuck one cannot linger or stay a zombie.
asio::awaitable<void> reap(pid_t pid) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (int i = 0; i < 50; ++i) {
    if (::waitpid(pid, nullptr, WNOHANG) != 0) co_return;
    timer.expires_after(std::chrono::milliseconds(100));
    co_await timer.async_wait(asio::as_tuple(use_awaitable));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// A process whose stdin and stdout are one end of a socketpair: the agent's end is a socket, so
// half-close is shutdown(SHUT_WR) and a write to an exited process is EPIPE, not SIGPIPE.
class ProcessConn : public SocketConn<asio::local::stream_protocol::socket> {
 public:
  ProcessConn(asio::local::stream_protocol::socket socket, pid_t pid)
      : SocketConn(std::move(socket)), pid_(pid) {}
  ~ProcessConn() override {
    close();
    asio::co_spawn(socket_.get_executor(), reap(pid_), asio::detached);
  }

 private:
  pid_t pid_;
};

Result<std::unique_ptr<TargetConn>> spawnProcess(asio::any_io_executor ex, const TunnelTarget& t) {
  if (t.argv.empty() || t.argv[0].empty() || t.argv[0][0] != '/')
    return Status::InvalidArgument("tunnel process needs an absolute program path");
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return Status::Unavailable(std::string("socketpair failed: ") + std::strerror(errno));
  int errPipe[2];
  if (::pipe2(errPipe, O_CLOEXEC) != 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    return Status::Unavailable(std::string("pipe failed: ") + std::strerror(errno));
  }
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<char*> argv;
  for (const auto& a : t.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> procs;
  for (const auto& g : t.cgroups) procs.push_back(g + "/cgroup.procs");
  const std::vector<char*>& envp = fixedEnvironment();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(sv[0]);
    ::close(errPipe[0]);
    int err = 0;
    // "0" moves the writer itself; first, while still root, so all that follows is confined.
    for (const auto& p : procs) {
      int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) err = errno;
      if (fd >= 0) ::close(fd);
      if (err) break;
    }
    if (!err && (::dup2(sv[1], 0) < 0 || ::dup2(sv[1], 1) < 0)) err = errno;
    if (!err && t.gid &&
        (::setgroups(t.groups.size(), t.groups.data()) != 0 || ::setgid(*t.gid) != 0))
      err = errno;
    if (!err && t.uid && ::setuid(*t.uid) != 0) err = errno;
    if (!err) {
      ::execve(argv[0], argv.data(), envp.data());  // never the agent's environment
      err = errno;
    }
    [[maybe_unused]] auto n = ::write(errPipe[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(sv[1]);
  ::close(errPipe[1]);
  if (pid < 0) {
    ::close(sv[0]);
    ::close(errPipe[0]);
    return Status::Unavailable(std::string("fork failed: ") + std::strerror(errno));
  }
  // EOF here means exec succeeded (the pipe is close-on-exec); otherwise the child's errno.
  int childErr = 0;
  ssize_t n;
  do {
    n = ::read(errPipe[0], &childErr, sizeof childErr);
  } while (n < 0 && errno == EINTR);
  ::close(errPipe[0]);
  if (n > 0) {
    ::close(sv[0]);
    ::waitpid(pid, nullptr, 0);
    return Status::Unavailable("cannot start " + t.argv[0] + ": " + std::strerror(childErr));
  }
  asio::local::stream_protocol::socket socket(ex);
  error_code ec;
  socket.assign(asio::local::stream_protocol(), sv[0], ec);
  if (ec) {
    ::close(sv[0]);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Status::Unavailable("cannot use the process's socket: " + ec.message());
  }
  return std::unique_ptr<TargetConn>(new ProcessConn(std::move(socket), pid));
}

asio::awaitable<Result<std::unique_ptr<TargetConn>>> connectTarget(asio::any_io_executor ex,
                                                                   const TunnelTarget& t) {
  switch (t.kind) {
    case TunnelTarget::Kind::kUnixSocket: {
      using Local = asio::local::stream_protocol;
      if (t.path.empty() || t.path.size() >= sizeof(sockaddr_un::sun_path))
        co_return Status::InvalidArgument("bad Unix socket path '" + t.path + "'");
      Local::socket socket(ex);
      Local::endpoint ep(t.path);
      auto [ec] = co_await socket.async_connect(ep, asio::as_tuple(use_awaitable));
      if (ec) co_return Status::Unavailable("cannot connect to " + t.path + ": " + ec.message());
      if (t.peerUid) {
        ucred peer{};
        socklen_t len = sizeof peer;
        if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 ||
            peer.uid != *t.peerUid)
          co_return Status::PermissionDenied(t.path + " is not served by uid " +
                                             std::to_string(*t.peerUid) + "; refusing it");
      }
      co_return std::unique_ptr<TargetConn>(new SocketConn<Local::socket>(std::move(socket)));
    }
    case TunnelTarget::Kind::kTcpPort: {
      using Tcp = asio::ip::tcp;
      Tcp::socket socket(ex);
      Tcp::endpoint ep(asio::ip::address_v4::loopback(), t.port);
      auto [ec] = co_await socket.async_connect(ep, asio::as_tuple(use_awaitable));
      if (ec)
        co_return Status::Unavailable("cannot connect to 127.0.0.1:" + std::to_string(t.port) +
                                      ": " + ec.message());
      socket.set_option(Tcp::no_delay(true), ec);
      co_return std::unique_ptr<TargetConn>(new SocketConn<Tcp::socket>(std::move(socket)));
    }
    case TunnelTarget::Kind::kProcess:
      co_return spawnProcess(ex, t);
  }
  co_return Status::Internal("unknown tunnel target kind");
}

// Target -> allotd: EOF becomes CLOSE; a failure resets the stream.
asio::awaitable<void> pumpUp(std::shared_ptr<TunnelStream> stream,
                             std::shared_ptr<TargetConn> conn) {
  std::string buf(model::kMaxTunnelData, '\0');
  for (;;) {
    auto [ec, n] = co_await conn->readSome(asio::buffer(buf));
    if (ec == asio::error::eof) {
      stream->closeWrite();
      co_return;
    }
    if (ec) {
      stream->reset("target read failed: " + ec.message());
      conn->close();
      co_return;
    }
    auto writing = stream->write(buf.substr(0, n));
    Status st = co_await std::move(writing);
    if (!st.ok()) {
      conn->close();
      co_return;
    }
  }
}

// allotd -> target: CLOSE shuts the target's write side; a reset closes the target.
asio::awaitable<void> pumpDown(std::shared_ptr<TunnelStream> stream,
                               std::shared_ptr<TargetConn> conn) {
  for (;;) {
    auto bytes = co_await stream->read();
    if (!bytes.ok()) {
      conn->close();
      co_return;
    }
    if (bytes->empty()) {
      conn->shutdownWrite();
      co_return;
    }
    error_code ec = co_await conn->writeAll(asio::buffer(*bytes));
    if (ec) {
      stream->reset("target write failed: " + ec.message());
      conn->close();
      co_return;
    }
  }
}

asio::awaitable<void> serveStream(std::shared_ptr<TunnelMux> mux,
                                  std::shared_ptr<TunnelStream> stream, TunnelTarget target) {
  auto ex = co_await asio::this_coro::executor;
  auto connecting = connectTarget(ex, target);
  auto conn = co_await std::move(connecting);
  if (!conn.ok()) {
    spdlog::info("tunnel stream {}: {}", stream->id(), conn.status().message());
    mux->refuse(*stream, conn.status().message());
    co_return;
  }
  std::shared_ptr<TargetConn> c = std::move(*conn);
  // Reset meanwhile (allotd gave up, or the connection dropped): the target is closed unused.
  if (stream->finished()) co_return;
  mux->accept(*stream);
  asio::co_spawn(ex, pumpUp(stream, c), asio::detached);
  auto down = pumpDown(stream, c);
  co_await std::move(down);
}

}  // namespace

Result<TunnelTarget> refuseAllTunnels(int64_t session, const std::string& target) {
  return Status::NotFound("no such session " + std::to_string(session) + " (target " + target +
                          ")");
}

TunnelEndpoint::TunnelEndpoint(asio::any_io_executor ex, tunnel::FrameSink sink,
                               TunnelResolver resolver)
    : ex_(ex),
      resolver_(resolver ? std::move(resolver) : TunnelResolver(refuseAllTunnels)),
      mux_(std::make_shared<TunnelMux>(std::move(ex), std::move(sink))) {}

TunnelEndpoint::~TunnelEndpoint() { shutdown(); }

void TunnelEndpoint::shutdown() { mux_->shutdown("connection to allotd dropped"); }

void TunnelEndpoint::onFrame(std::string_view message) {
  auto frame = model::decodeTunnelFrame(message);
  if (!frame.ok()) {
    spdlog::warn("bad tunnel frame from allotd dropped: {}", frame.status().message());
    return;
  }
  if (frame->op != model::TunnelOp::kOpen) {
    mux_->deliver(*frame);
    return;
  }
  auto stream = mux_->incoming(frame->stream);
  auto open = model::tunnelOpenFromPayload(frame->payload);
  if (!open.ok()) {
    mux_->refuse(*stream, open.status().message());
    return;
  }
  auto target = resolver_(open->session, open->target);
  if (!target.ok()) {
    mux_->refuse(*stream, target.status().message());
    return;
  }
  asio::co_spawn(ex_, serveStream(mux_, stream, std::move(*target)), asio::detached);
}

}  // namespace allot::agent
