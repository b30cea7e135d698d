#include "api/event_hub.h"

#include <type_traits>
#include <variant>

namespace allot::api {

uint32_t topicsOf(const store::WriteBatch& batch) {
  uint32_t t = 0;
  for (const auto& op : batch.ops) {
    std::visit(
        [&t](const auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, store::PutTeam> || std::is_same_v<T, store::PutProject>)
            t |= kTopicTeams;
          else if constexpr (std::is_same_v<T, store::PutUser> ||
                             std::is_same_v<T, store::PutToken> ||
                             std::is_same_v<T, store::DeleteToken>)
            t |= kTopicUsers;
          else if constexpr (std::is_same_v<T, store::PutHost> ||
                             std::is_same_v<T, store::PutJoinToken> ||
                             std::is_same_v<T, store::AppendHostTransition> ||
                             std::is_same_v<T, store::PutUpgrade>)
            t |= kTopicHosts;
          else if constexpr (std::is_same_v<T, store::PutJob>)
            t |= kTopicJobs;
          else if constexpr (std::is_same_v<T, store::AppendLedger>)
            t |= kTopicUsage;
          else if constexpr (std::is_same_v<T, store::PutLease>)
            t |= kTopicLeases;
          else if constexpr (std::is_same_v<T, store::AppendAudit>)
            t |= kTopicAudit;
          else if constexpr (std::is_same_v<T, store::AppendEvent>)
            // Events are idle-allocation notices: about jobs, under their team's policy.
            t |= kTopicJobs | kTopicTeams;
          else if constexpr (std::is_same_v<T, store::PutMeta>)
            ;  // counters (next ids): no view shows them
          else if constexpr (std::is_same_v<T, store::PutProfile> ||
                             std::is_same_v<T, store::DeleteProfile>)
            t |= kTopicTeams;  // session profiles are teams' settings
          else
            // A new kind of operation: announce everything rather than miss a change.
            t |= ~0u & ~kTopicTelemetry;
        },
        op);
  }
  return t;
}

std::vector<std::string> topicNames(uint32_t topics) {
  static constexpr const char* kNames[] = {"jobs",  "hosts", "leases",    "teams",
                                           "users", "usage", "telemetry", "audit"};
  std::vector<std::string> out;
  for (int i = 0; i < 8; ++i) {
    if (topics & (1u << i)) out.emplace_back(kNames[i]);
  }
  return out;
}

EventHub::Subscriber::Subscriber(EventHub& hub, boost::asio::steady_timer& wake)
    : hub_(hub), wake_(wake) {
  self_ = hub_.subscribers_.insert(hub_.subscribers_.end(), this);
}

EventHub::Subscriber::~Subscriber() { hub_.subscribers_.erase(self_); }

void EventHub::publish(uint32_t topics) {
  if (topics == 0) return;
  ++rev_;
  for (Subscriber* s : subscribers_) {
    const bool wasIdle = s->pending_ == 0;
    s->pending_ |= topics;
    if (wasIdle) s->wake_.cancel();
  }
}

void EventHub::telemetryIngested(int64_t nowMs) {
  if (lastTelemetryMs_ != INT64_MIN && nowMs - lastTelemetryMs_ < kTelemetryEveryMs) return;
  lastTelemetryMs_ = nowMs;
  publish(kTopicTelemetry);
}

}  // namespace allot::api
