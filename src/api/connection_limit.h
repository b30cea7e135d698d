#pragma once
// How many connections allotd holds at once, in all and per client, so that no one client (an
// unauthenticated one included) takes every descriptor allotd has: agents, the CLI and the
// console must still get in. A connection over either limit is closed as soon as it is accepted.
//
// The limit per client alone does not do it: a few clients (16 addresses, or 16 of an IPv6
// attacker's /64s) at their limit fill the total with connections that send nothing. So a
// connection that waits for a request (or for its TLS handshake) is idle and may be closed to
// make room: when every place is taken, a new connection closes the one idle longest, as nginx
// reuses its idle keep-alive connections. Connections serving a request, and the streams that
// follow one (agents, events, sessions), are never closed for another.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

namespace allot::api {

struct ConnectionLimits {
  // 0: derived from what the process may open (connectionsForDescriptors).
  size_t total = 0;
  // One client: an IPv4 address, or an IPv6 /64 (clientKey). A login node that many people's CLIs
  // share comes from one address; 0 = no limit.
  size_t perClient = 1024;
};

// The connections that `descriptors` (RLIMIT_NOFILE) leave room for once the store, the log
// store and the agents' work have theirs, capped so that idle connections cannot take all memory.
size_t connectionsForDescriptors(size_t descriptors);

// Who a limit per client counts: an IPv4 address as it is ("::ffff:10.0.0.1" as "10.0.0.1"),
// an IPv6 address by its /64, which one host or one customer is usually handed whole; anything
// that is not an address as it is.
std::string clientKey(const std::string& address);

class ConnectionLimiter : public std::enable_shared_from_this<ConnectionLimiter> {
 public:
  // Gives its connection's place back when destroyed.
  class Slot {
   public:
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&& other) noexcept;  // gives this slot's place back first
    ~Slot();

    // The connection waits for a request: `close` ends it (closes its socket), which the limiter
    // may call from admit() until busy(). busy() is false when it did: the connection is over,
    // even if what it waited for had come just before.
    void idle(std::function<void()> close);
    bool busy();

   private:
    friend class ConnectionLimiter;
    Slot(std::shared_ptr<ConnectionLimiter> limiter, std::string client)
        : limiter_(std::move(limiter)), client_(std::move(client)) {}
    void giveBack();

    std::shared_ptr<ConnectionLimiter> limiter_;
    std::string client_;
    uint64_t idleSince_ = 0;  // its place in the limiter's idle list; 0 when not in it
    bool closing_ = false;    // closed to make room, and not yet ended
  };

  // Shared: each slot keeps the limiter alive, whatever order coroutine frames go in.
  static std::shared_ptr<ConnectionLimiter> create(ConnectionLimits limits);

  // A place for a connection from `address`, or nullopt when it would pass either limit and no
  // idle connection can be closed to make room.
  std::optional<Slot> admit(const std::string& address);
  size_t open() const { return open_; }
  size_t idle() const { return idle_.size(); }
  uint64_t closedForRoom() const { return closedForRoom_; }
  const ConnectionLimits& limits() const { return limits_; }

 private:
  explicit ConnectionLimiter(ConnectionLimits limits) : limits_(limits) {}
  void release(const std::string& client);

  ConnectionLimits limits_;
  size_t open_ = 0;
  size_t closing_ = 0;  // of open_: closed to make room, their coroutines not yet ended
  std::unordered_map<std::string, size_t> byClient_;
  // Idle connections' closers, the one idle longest first (keys only grow).
  std::map<uint64_t, std::function<void()>> idle_;
  uint64_t nextIdle_ = 1;
  uint64_t closedForRoom_ = 0;
};

}  // namespace allot::api
