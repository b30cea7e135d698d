// The connection limits: no one client, an unauthenticated one included, holds every connection
// allotd may have (api/connection_limit.h). The server's use of them is attacked over real
// sockets in tests/limits_test.cc.

#include "api/connection_limit.h"

#include <gtest/gtest.h>

#include <vector>

namespace allot::api {
namespace {

TEST(ConnectionLimiter, OneClientGetsItsShareAndNoMore) {
  auto limiter = ConnectionLimiter::create({.total = 10, .perClient = 3});
  std::vector<ConnectionLimiter::Slot> held;
  for (int i = 0; i < 3; ++i) {
    auto slot = limiter->admit("10.0.0.1");
    ASSERT_TRUE(slot) << i;
    held.push_back(std::move(*slot));
  }
  EXPECT_FALSE(limiter->admit("10.0.0.1"));
  EXPECT_FALSE(limiter->admit("::ffff:10.0.0.1")) << "the same client, written as IPv6";
  EXPECT_TRUE(limiter->admit("10.0.0.2")) << "another client is not held to the first's count";
  held.pop_back();  // a connection ends: its place is free again
  EXPECT_TRUE(limiter->admit("10.0.0.1"));
  EXPECT_EQ(limiter->open(), 2u) << "the slots admitted above and not kept have been given back";
}

TEST(ConnectionLimiter, AllClientsTogetherStopAtTheTotal) {
  auto limiter = ConnectionLimiter::create({.total = 4, .perClient = 0});
  std::vector<ConnectionLimiter::Slot> held;
  for (int i = 0; i < 4; ++i) held.push_back(*limiter->admit("10.0.1." + std::to_string(i)));
  EXPECT_FALSE(limiter->admit("10.0.2.1"));
  held.clear();
  EXPECT_EQ(limiter->open(), 0u);
  EXPECT_TRUE(limiter->admit("10.0.2.1"));
}

TEST(ConnectionLimiter, ASlotAssignedOverAnotherGivesTheOthersPlaceBack) {
  auto limiter = ConnectionLimiter::create({.total = 2, .perClient = 0});
  std::optional<ConnectionLimiter::Slot> slot = limiter->admit("10.0.0.1");
  slot = limiter->admit("10.0.0.2");  // the first slot's place is given back, not lost
  EXPECT_EQ(limiter->open(), 1u);
  slot.reset();
  EXPECT_EQ(limiter->open(), 0u);
}

TEST(ConnectionLimiter, ASlotOutlivingItsLimiterStillGivesItsPlaceBack) {
  std::optional<ConnectionLimiter::Slot> slot;
  {
    auto limiter = ConnectionLimiter::create({});
    slot = limiter->admit("127.0.0.1");
  }
  slot.reset();  // must not touch freed memory (the sanitizer build checks)
  SUCCEED();
}

TEST(ClientKey, AnIpv6ClientIsItsSlash64) {
  // One host is usually handed a whole /64: counted by address, it would have 2^64 of them.
  EXPECT_EQ(clientKey("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::/64");
  EXPECT_EQ(clientKey("2001:db8:1:2::1"), clientKey("2001:db8:1:2:ffff::9"));
  EXPECT_NE(clientKey("2001:db8:1:2::1"), clientKey("2001:db8:1:3::1"));
  EXPECT_EQ(clientKey("::ffff:192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(clientKey("192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(clientKey(""), "");
}

TEST(ConnectionsForDescriptors, LeavesRoomForTheStoreAndStopsAtMemorysBound) {
  EXPECT_EQ(connectionsForDescriptors(1024), 768u);
  EXPECT_EQ(connectionsForDescriptors(100), 64u) << "never fewer than a small cluster needs";
  EXPECT_EQ(connectionsForDescriptors(524288), 16384u);
}

}  // namespace
}  // namespace allot::api
