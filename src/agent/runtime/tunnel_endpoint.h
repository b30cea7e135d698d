#pragma once
// TunnelEndpoint: the agent's end of the byte tunnels allotd opens over the agent WebSocket
// (docs/design/sessions.md, 3.1). On OPEN it asks its resolver what (session, target) means on
// this host, connects to that (a Unix socket, a loopback TCP port, or a process whose stdin and
// stdout are the stream, e.g. `sshd -i`), answers OPEN_OK or OPEN_FAIL, and pumps bytes both ways
// within the streams' credit windows. CLOSE from allotd shuts the target's write side down; EOF
// from the target sends CLOSE; errors reset the stream. allotd names sessions, never ports: the
// resolver decides what a stream may reach.
//
// One endpoint per connection; shutdown() (or the destructor) when the connection drops resets
// every stream and closes its target. Runs on the agent's I/O thread only.

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tunnel/tunnel_stream.h"

namespace allot::agent {

// What a stream connects to on this host.
struct TunnelTarget {
  enum class Kind { kUnixSocket, kTcpPort, kProcess };
  Kind kind = Kind::kUnixSocket;
  std::string path;  // kUnixSocket
  // kUnixSocket: the uid the listening end must have (SO_PEERCRED), when the socket lies where
  // a workload can write: the agent connects as root, and must not be led by a link planted
  // there to someone else's socket (another user's Jupyter, a root daemon's).
  std::optional<uid_t> peerUid;
  uint16_t port = 0;              // kTcpPort, on 127.0.0.1
  std::vector<std::string> argv;  // kProcess: argv[0] is the program's absolute path
  // kProcess: the identity it runs as; unset = the agent's own.
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  std::vector<gid_t> groups;  // supplementary groups, set when gid is
  // kProcess: cgroup directories it joins before anything else (a session's, so that what it
  // starts is confined and accounted with the session).
  std::vector<std::string> cgroups;

  static TunnelTarget unixSocket(std::string path) {
    TunnelTarget t;
    t.kind = Kind::kUnixSocket;
    t.path = std::move(path);
    return t;
  }
  static TunnelTarget tcpPort(uint16_t port) {
    TunnelTarget t;
    t.kind = Kind::kTcpPort;
    t.port = port;
    return t;
  }
  static TunnelTarget process(std::vector<std::string> argv) {
    TunnelTarget t;
    t.kind = Kind::kProcess;
    t.argv = std::move(argv);
    return t;
  }
};

// Maps an OPEN's (session, target) to what to connect; an error becomes the OPEN_FAIL reason.
using TunnelResolver =
    std::function<Result<TunnelTarget>(int64_t session, const std::string& target)>;

// Refuses everything: an agent that runs no sessions.
Result<TunnelTarget> refuseAllTunnels(int64_t session, const std::string& target);

class TunnelEndpoint {
 public:
  TunnelEndpoint(boost::asio::any_io_executor ex, tunnel::FrameSink sink, TunnelResolver resolver);
  ~TunnelEndpoint();
  TunnelEndpoint(const TunnelEndpoint&) = delete;
  TunnelEndpoint& operator=(const TunnelEndpoint&) = delete;

  // A binary message from allotd that isTunnelFrame(); a bad frame is logged and dropped.
  void onFrame(std::string_view message);
  // The connection dropped: every stream is reset and its target closed.
  void shutdown();
  size_t streamCount() const { return mux_->streamCount(); }
  // For the connection's writer to tell it how many bytes of frames wait (backpressure).
  std::weak_ptr<tunnel::TunnelMux> mux() const { return mux_; }

 private:
  boost::asio::any_io_executor ex_;
  TunnelResolver resolver_;
  std::shared_ptr<tunnel::TunnelMux> mux_;
};

}  // namespace allot::agent
