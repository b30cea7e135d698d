#pragma once
// EventHub: tells the web console's live streams (GET /api/v1/stream) that something changed,
// and what kind of thing, never what: the console refetches through the authorized API, so
// nothing can leak through a stream. Server::commit publishes the topics of each durable batch;
// telemetry ingestion publishes `telemetry` at most every kTelemetryEveryMs.
//
// Each stream is a Subscriber with one pending set of topics (coalesced: a burst of commits is
// one message) and a timer the hub cancels to wake it when news arrives. Publishing costs one
// pass over the subscribers. I/O thread only.

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "store/store.h"

namespace allot::api {

// Topics as bits; names in topicNames.
enum Topic : uint32_t {
  kTopicJobs = 1u << 0,       // jobs, the queue, logs ending
  kTopicHosts = 1u << 1,      // hosts, GPUs, dedication, host tasks, upgrades, join tokens
  kTopicLeases = 1u << 2,     // leases
  kTopicTeams = 1u << 3,      // teams, quotas, projects, members, idle policies
  kTopicUsers = 1u << 4,      // users, tokens, sessions
  kTopicUsage = 1u << 5,      // the allocation ledger
  kTopicTelemetry = 1u << 6,  // new GPU samples
  kTopicAudit = 1u << 7,      // the audit log
};

// The topics a durable batch touches; generous where an operation could matter to several.
uint32_t topicsOf(const store::WriteBatch& batch);
// The names of the set bits, in a fixed order: {"jobs", "hosts", ...}.
std::vector<std::string> topicNames(uint32_t topics);

class EventHub {
 public:
  static constexpr int64_t kTelemetryEveryMs = 5000;

  // One stream's mailbox. Registers itself for its lifetime.
  class Subscriber {
   public:
    Subscriber(EventHub& hub, boost::asio::steady_timer& wake);
    ~Subscriber();
    Subscriber(const Subscriber&) = delete;
    Subscriber& operator=(const Subscriber&) = delete;
    // The coalesced topics since the last take, cleared.
    uint32_t take() { return std::exchange(pending_, 0u); }
    uint32_t pending() const { return pending_; }

   private:
    friend class EventHub;
    EventHub& hub_;
    boost::asio::steady_timer& wake_;
    uint32_t pending_ = 0;
    std::list<Subscriber*>::iterator self_;
  };

  // Adds `topics` to every subscriber's pending set and bumps the revision. A subscriber that had
  // nothing pending is woken; one that had is already waiting out its coalescing delay.
  void publish(uint32_t topics);
  // `telemetry`, unless it went out less than kTelemetryEveryMs ago (by `nowMs`, monotonic).
  void telemetryIngested(int64_t nowMs);
  // Process-wide: how many publishes so far.
  int64_t rev() const { return rev_; }
  size_t subscribers() const { return subscribers_.size(); }

 private:
  std::list<Subscriber*> subscribers_;
  int64_t rev_ = 0;
  int64_t lastTelemetryMs_ = INT64_MIN;
};

}  // namespace allot::api
