#include "api/connection_limit.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>

namespace allot::api {
namespace {

// Descriptors kept for everything but client connections: SQLite's database, WAL and journal,
// telemetry.db, job logs being written, webhooks, the login pool, listeners.
constexpr size_t kReservedDescriptors = 256;
// An idle connection costs allotd its buffers and coroutine frame, some KiB: beyond this many,
// memory, not descriptors, is what a flood would exhaust.
constexpr size_t kMaxConnections = 16384;

}  // namespace

size_t connectionsForDescriptors(size_t descriptors) {
  const size_t room = descriptors > kReservedDescriptors ? descriptors - kReservedDescriptors : 0;
  return std::clamp<size_t>(room, 64, kMaxConnections);
}

std::string clientKey(const std::string& address) {
  boost::system::error_code ec;
  auto parsed = boost::asio::ip::make_address(address, ec);
  if (ec) return address;
  if (parsed.is_v4()) return parsed.to_string();
  auto v6 = parsed.to_v6();
  if (v6.is_v4_mapped())
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6).to_string();
  auto bytes = v6.to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  return boost::asio::ip::address_v6(bytes).to_string() + "/64";
}

std::shared_ptr<ConnectionLimiter> ConnectionLimiter::create(ConnectionLimits limits) {
  return std::shared_ptr<ConnectionLimiter>(new ConnectionLimiter(limits));
}

std::optional<ConnectionLimiter::Slot> ConnectionLimiter::admit(const std::string& address) {
  if (limits_.total > 0 && open_ >= limits_.total) return std::nullopt;
  std::string client = clientKey(address);
  size_t& held = byClient_[client];
  if (limits_.perClient > 0 && held >= limits_.perClient) return std::nullopt;
  ++held;
  ++open_;
  return Slot(shared_from_this(), std::move(client));
}

void ConnectionLimiter::release(const std::string& client) {
  --open_;
  auto it = byClient_.find(client);
  if (it != byClient_.end() && --it->second == 0) byClient_.erase(it);
}

ConnectionLimiter::Slot& ConnectionLimiter::Slot::operator=(Slot&& other) noexcept {
  if (this == &other) return *this;
  if (limiter_) limiter_->release(client_);
  limiter_ = std::move(other.limiter_);
  client_ = std::move(other.client_);
  return *this;
}

ConnectionLimiter::Slot::~Slot() {
  if (limiter_) limiter_->release(client_);
}

}  // namespace allot::api
