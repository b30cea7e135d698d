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
  std::string client = clientKey(address);
  if (limits_.perClient > 0) {
    auto it = byClient_.find(client);
    if (it != byClient_.end() && it->second >= limits_.perClient) return std::nullopt;
  }
  if (limits_.total > 0 && open_ - closing_ >= limits_.total) {
    if (idle_.empty()) return std::nullopt;
    // The closer closes the connection's socket; its coroutine ends on a later turn and gives the
    // place back then. Counted as closing meanwhile, so the next admit closes another.
    auto longest = idle_.begin();
    auto close = std::move(longest->second);
    idle_.erase(longest);
    ++closing_;
    ++closedForRoom_;
    close();
  }
  ++byClient_[client];
  ++open_;
  return Slot(shared_from_this(), std::move(client));
}

void ConnectionLimiter::release(const std::string& client) {
  --open_;
  auto it = byClient_.find(client);
  if (it != byClient_.end() && --it->second == 0) byClient_.erase(it);
}

ConnectionLimiter::Slot::Slot(Slot&& other) noexcept
    : limiter_(std::move(other.limiter_)),
      client_(std::move(other.client_)),
      idleSince_(std::exchange(other.idleSince_, 0)),
      closing_(std::exchange(other.closing_, false)) {}

ConnectionLimiter::Slot& ConnectionLimiter::Slot::operator=(Slot&& other) noexcept {
  if (this == &other) return *this;
  giveBack();
  limiter_ = std::move(other.limiter_);
  client_ = std::move(other.client_);
  idleSince_ = std::exchange(other.idleSince_, 0);
  closing_ = std::exchange(other.closing_, false);
  return *this;
}

ConnectionLimiter::Slot::~Slot() { giveBack(); }

void ConnectionLimiter::Slot::giveBack() {
  if (!limiter_) return;
  // A slot the limiter closed is no longer in its idle list, which is how it tells.
  if (!busy()) --limiter_->closing_;
  limiter_->release(client_);
  limiter_.reset();
}

void ConnectionLimiter::Slot::idle(std::function<void()> close) {
  if (!limiter_ || !busy()) return;
  idleSince_ = limiter_->nextIdle_++;
  limiter_->idle_.emplace(idleSince_, std::move(close));
}

bool ConnectionLimiter::Slot::busy() {
  if (!limiter_) return false;
  if (idleSince_ != 0) {
    // Gone from the list: the limiter closed it.
    if (limiter_->idle_.erase(idleSince_) == 0) closing_ = true;
    idleSince_ = 0;
  }
  return !closing_;
}

}  // namespace allot::api
