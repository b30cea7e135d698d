// The live streams' hub: which topics a durable batch announces, coalescing into one pending
// set per stream, the process-wide revision, and telemetry at most every few seconds.

#include "api/event_hub.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

namespace allot::api {
namespace {

TEST(EventHubTest, TopicsFollowTheBatchsOperations) {
  store::WriteBatch jobs;
  jobs.add(store::PutJob{}).add(store::AppendLedger{});
  EXPECT_EQ(topicNames(topicsOf(jobs)), (std::vector<std::string>{"jobs", "usage"}));
  store::WriteBatch mixed;
  mixed.add(store::PutHost{}).add(store::PutLease{}).add(store::PutTeam{}).add(store::PutToken{});
  mixed.add(store::AppendAudit{});
  EXPECT_EQ(topicNames(topicsOf(mixed)),
            (std::vector<std::string>{"hosts", "leases", "teams", "users", "audit"}));
  store::WriteBatch counters;
  counters.add(store::PutMeta{"next_uid", "1001"});
  EXPECT_EQ(topicsOf(counters), 0u);
}

TEST(EventHubTest, PublishCoalescesPerSubscriberAndCountsRevisions) {
  boost::asio::io_context io;
  EventHub hub;
  boost::asio::steady_timer t1(io), t2(io);
  EXPECT_EQ(hub.rev(), 0);
  {
    EventHub::Subscriber a(hub, t1);
    EventHub::Subscriber b(hub, t2);
    EXPECT_EQ(hub.subscribers(), 2u);
    hub.publish(kTopicJobs);
    hub.publish(kTopicHosts);
    hub.publish(0);  // nothing changed: no revision
    EXPECT_EQ(hub.rev(), 2);
    EXPECT_EQ(a.take(), kTopicJobs | kTopicHosts);
    EXPECT_EQ(a.take(), 0u);
    hub.publish(kTopicAudit);
    EXPECT_EQ(a.take(), kTopicAudit);
    EXPECT_EQ(b.take(), kTopicJobs | kTopicHosts | kTopicAudit);
  }
  EXPECT_EQ(hub.subscribers(), 0u);
}

TEST(EventHubTest, TelemetryAtMostEveryFewSeconds) {
  boost::asio::io_context io;
  EventHub hub;
  boost::asio::steady_timer t(io);
  EventHub::Subscriber s(hub, t);
  hub.telemetryIngested(1000);
  EXPECT_EQ(s.take(), kTopicTelemetry);
  hub.telemetryIngested(1000 + EventHub::kTelemetryEveryMs - 1);
  EXPECT_EQ(s.take(), 0u);
  hub.telemetryIngested(1000 + EventHub::kTelemetryEveryMs);
  EXPECT_EQ(s.take(), kTopicTelemetry);
}

}  // namespace
}  // namespace allot::api
