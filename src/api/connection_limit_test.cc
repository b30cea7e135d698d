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

// Idle connections are closed to make room when every place is taken, the one idle longest
// first; connections in use never are, and with none idle a new one is refused as before.
TEST(ConnectionLimiter, AtTheTotalANewConnectionClosesTheOneIdleLongest) {
  auto limiter = ConnectionLimiter::create({.total = 3, .perClient = 0});
  std::vector<std::string> closed;
  std::vector<ConnectionLimiter::Slot> held;
  for (const char* who : {"a", "b", "c"})
    held.push_back(*limiter->admit(std::string("10.0.0.") + who));
  held[1].idle([&] { closed.push_back("b"); });
  held[0].idle([&] { closed.push_back("a"); });  // idle since after b
  // c serves a request: never closed for another.
  auto fourth = limiter->admit("10.0.1.1");
  ASSERT_TRUE(fourth);
  EXPECT_EQ(closed, std::vector<std::string>{"b"});
  EXPECT_EQ(limiter->closedForRoom(), 1u);
  // a turns busy before anyone needs its place: it is kept, and nothing else is idle.
  EXPECT_TRUE(held[0].busy());
  EXPECT_FALSE(limiter->admit("10.0.1.2"));
  EXPECT_EQ(closed, std::vector<std::string>{"b"});
  // b's connection, closed, asks to wait again: it is ending, so it is not listed (nor closed
  // twice), and once it ends its place is the only one given back.
  held[1].idle([&] { closed.push_back("b again"); });
  EXPECT_EQ(limiter->idle(), 0u);
  // What b had read when it was closed is not served: its connection is over.
  EXPECT_FALSE(held[1].busy());
  held.erase(held.begin() + 1);
  EXPECT_EQ(limiter->open(), 3u);
  EXPECT_FALSE(limiter->admit("10.0.1.3"));
  // An idle slot that ends on its own leaves the list.
  held[0].idle([&] { closed.push_back("a"); });
  held.erase(held.begin());
  EXPECT_EQ(limiter->idle(), 0u);
  EXPECT_TRUE(limiter->admit("10.0.1.4"));
  EXPECT_EQ(closed, std::vector<std::string>{"b"});
}

// The place of a connection closed to make room counts for the new one at once, not when the
// closed one's coroutine ends: a burst of new connections closes one idle connection each, not
// the same number again and again, and the total is kept once they end.
TEST(ConnectionLimiter, AClosedConnectionsPlaceIsTakenOnce) {
  auto limiter = ConnectionLimiter::create({.total = 2, .perClient = 0});
  int closedCount = 0;
  std::vector<ConnectionLimiter::Slot> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(*limiter->admit("10.0.0." + std::to_string(i)));
    held.back().idle([&] { ++closedCount; });
  }
  auto first = limiter->admit("10.0.1.1");
  auto second = limiter->admit("10.0.1.2");
  ASSERT_TRUE(first && second);
  EXPECT_EQ(closedCount, 2);
  EXPECT_FALSE(limiter->admit("10.0.1.3")) << "nothing idle is left to close";
  held.clear();  // the closed connections end
  EXPECT_EQ(limiter->open(), 2u);
  EXPECT_FALSE(limiter->admit("10.0.1.3"));
}

// A client over its own limit is refused without closing anyone's idle connection.
TEST(ConnectionLimiter, AClientOverItsOwnLimitClosesNoOne) {
  auto limiter = ConnectionLimiter::create({.total = 2, .perClient = 1});
  auto mine = limiter->admit("10.0.0.1");
  auto theirs = limiter->admit("10.0.0.2");
  bool closed = false;
  theirs->idle([&] { closed = true; });
  EXPECT_FALSE(limiter->admit("10.0.0.1"));
  EXPECT_FALSE(closed);
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
