#pragma once
// How many connections allotd holds at once, in all and per client, so that no one client (an
// unauthenticated one included) takes every descriptor allotd has: agents, the CLI and the
// console must still get in. A connection over either limit is closed as soon as it is accepted.

#include <cstddef>
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
    Slot(Slot&&) = default;
    Slot& operator=(Slot&& other) noexcept;  // gives this slot's place back first
    ~Slot();

   private:
    friend class ConnectionLimiter;
    Slot(std::shared_ptr<ConnectionLimiter> limiter, std::string client)
        : limiter_(std::move(limiter)), client_(std::move(client)) {}
    std::shared_ptr<ConnectionLimiter> limiter_;
    std::string client_;
  };

  // Shared: each slot keeps the limiter alive, whatever order coroutine frames go in.
  static std::shared_ptr<ConnectionLimiter> create(ConnectionLimits limits);

  // A place for a connection from `address`, or nullopt when it would pass either limit.
  std::optional<Slot> admit(const std::string& address);
  size_t open() const { return open_; }
  const ConnectionLimits& limits() const { return limits_; }

 private:
  explicit ConnectionLimiter(ConnectionLimits limits) : limits_(limits) {}
  void release(const std::string& client);

  ConnectionLimits limits_;
  size_t open_ = 0;
  std::unordered_map<std::string, size_t> byClient_;
};

}  // namespace allot::api
