// Leases with real processes: a lease that starts ~2 s from now and ends ~4 s later hands the
// host to the team (drain, wipe, health check on the real agent) and back to the shared pool, on
// allotd's own clock. The lag from the lease's times to what the host did is printed for
// docs/benchmarks.md (no assertion on it). A start that allotd was down (killed) for happens when
// it is back. Plus the API's answers to bad lease requests.

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "harness.h"
#include "refusals.h"

namespace allot::it {
namespace {

using std::chrono::system_clock;

class LeaseTest : public TestCluster {};

// Whole seconds, so that the ISO 8601 text (which has no fraction) is the instant meant.
std::string isoAt(system_clock::time_point t) {
  std::time_t secs = system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double secondsSince(system_clock::time_point t) {
  return std::chrono::duration<double>(system_clock::now() - t).count();
}

TEST_F(LeaseTest, HostGoesToTheTeamAtTheStartAndBackAtTheEnd) {
  startAgent("gpu-a", "sim:2xA100");
  createTeam("ml");
  std::string carol = createUser("carol", "ml");

  auto hostNow = [&] {
    return httpRequest(port_, "GET", "/api/v1/hosts/gpu-a", "", adminToken_).parsed();
  };
  const auto start =
      std::chrono::ceil<std::chrono::seconds>(system_clock::now()) + std::chrono::seconds(2);
  // Long enough that a slow handover (drain, wipe, health check) still ends inside the lease.
  const auto end = start + std::chrono::seconds(8);
  json created =
      cliJson(adminToken_, {"lease", "create", "--team", "ml", "--host", "gpu-a", "--start",
                            isoAt(start), "--end", isoAt(end), "--reason", "integration"});
  const std::string id = std::to_string(created.value("id", 0));
  EXPECT_EQ(textOf(created, "state"), "requested");
  // Members of other teams cannot see it; the team's members can.
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/leases/" + id, "", carol).status, 200);
  CliResult approved = cli({"lease", "approve", id});
  ASSERT_EQ(approved.code, 0) << approved.describe();
  EXPECT_EQ(textOf(hostNow().value("lease", json::object()), "state"), "approved");

  // The start: allotd begins the handover (the host leaves service), then the host is ml's.
  json last;
  ASSERT_TRUE(waitFor([&] {
    last = hostNow();
    return textOf(last, "admin_state") != "available" || textOf(last, "dedicated_to") == "ml";
  })) << last.dump();
  const double startLag = secondsSince(start);
  ASSERT_TRUE(waitFor([&] {
    last = hostNow();
    return textOf(last, "admin_state") == "available" && textOf(last, "dedicated_to") == "ml";
  })) << last.dump();
  const double assignedLag = secondsSince(start);
  EXPECT_EQ(textOf(last.value("lease", json::object()), "state"), "active") << last.dump();
  // The host is ml's alone: another team's member does not see it.
  createTeam("cv");
  std::string dave = createUser("dave", "cv");
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/hosts/gpu-a", "", dave).status, 404);

  // The end: back to the shared pool through a wipe and health check.
  ASSERT_TRUE(waitFor([&] {
    last = hostNow();
    return textOf(last, "handover_to") == "shared" || textOf(last, "dedicated_to").empty() ||
           textOf(last, "dedicated_to") == "-";
  })) << last.dump();
  const double endLag = secondsSince(end);
  ASSERT_TRUE(waitFor([&] {
    last = hostNow();
    return textOf(last, "admin_state") == "available" && last["dedicated_to"].is_null();
  })) << last.dump();
  const double returnedLag = secondsSince(end);
  json lease = httpRequest(port_, "GET", "/api/v1/leases/" + id, "", adminToken_).parsed();
  EXPECT_EQ(textOf(lease, "state"), "ended") << lease.dump();
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/hosts/gpu-a", "", dave).status, 200);

  std::cout << "lease lag: start->handover begun " << startLag << " s, start->host is the team's "
            << assignedLag << " s, end->handover begun " << endLag
            << " s, end->host back in the pool " << returnedLag << " s\n";
}

TEST_F(LeaseTest, AHostDedicatedBeforeTheLeaseGoesBackToItsTeamAtTheEnd) {
  startAgent("gpu-a", "sim:2xA100");
  createTeam("ml");
  createTeam("cv");
  std::string dave = createUser("dave", "cv");
  CliResult dedicated = cli({"host", "dedicate", "gpu-a", "--team", "cv"});
  ASSERT_EQ(dedicated.code, 0) << dedicated.describe();

  auto hostNow = [&] {
    return httpRequest(port_, "GET", "/api/v1/hosts/gpu-a", "", adminToken_).parsed();
  };
  const auto start =
      std::chrono::ceil<std::chrono::seconds>(system_clock::now()) + std::chrono::seconds(2);
  json created =
      cliJson(adminToken_, {"lease", "create", "--team", "ml", "--host", "gpu-a", "--start",
                            isoAt(start), "--end", isoAt(start + std::chrono::seconds(6))});
  const std::string id = std::to_string(created.value("id", 0));
  CliResult approved = cli({"lease", "approve", id});
  ASSERT_EQ(approved.code, 0) << approved.describe();

  json last;
  ASSERT_TRUE(waitFor([&] {
    last = hostNow();
    return textOf(last, "dedicated_to") == "ml";
  })) << last.dump();
  // While it is ml's, cv's members do not see it.
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/hosts/gpu-a", "", dave).status, 404);

  // At the end it is cv's again, not the shared pool's: the team did not silently lose it.
  ASSERT_TRUE(waitFor([&] {
    last = hostNow();
    return textOf(last, "admin_state") == "available" && textOf(last, "dedicated_to") == "cv";
  })) << last.dump();
  EXPECT_EQ(textOf(cliJson(adminToken_, {"lease", "show", id}), "state"), "ended");
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/hosts/gpu-a", "", dave).status, 200);
}

TEST_F(LeaseTest, ApprovingALeaseThatStopsWorkSaysWhatAndNeedsForce) {
  startAgent("gpu-a", "sim:2xA100");
  createTeam("ml");
  createTeam("cv");
  std::string carol = createUser("carol", "ml");
  std::string dave = createUser("dave", "cv");
  int64_t running = submit(dave, {"--gpus", "1", "--name", "eval"}, {"sleep", "600"});
  ASSERT_TRUE(waitForJobState(dave, running, "running"));
  const auto start =
      std::chrono::ceil<std::chrono::seconds>(system_clock::now()) + std::chrono::hours(1);
  json created =
      cliJson(adminToken_, {"lease", "create", "--team", "ml", "--host", "gpu-a", "--start",
                            isoAt(start), "--end", isoAt(start + std::chrono::hours(2))});
  const std::string id = std::to_string(created.value("id", 0));

  CliResult asked = cli({"lease", "approve", id});
  EXPECT_EQ(asked.code, 1) << asked.describe();
  EXPECT_NE(asked.err.find("j-" + std::to_string(running) + " eval (dave, team cv) on gpu-a"),
            std::string::npos)
      << asked.err;
  EXPECT_NE(asked.err.find("approving lease " + id +
                           " would stop the jobs above; run again "
                           "with --force"),
            std::string::npos)
      << asked.err;
  auto state = [&] {
    return textOf(httpRequest(port_, "GET", "/api/v1/leases/" + id, "", adminToken_).parsed(),
                  "state");
  };
  EXPECT_EQ(state(), "requested");
  // Only platform admins decide, so only they see what a decision would stop.
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/leases/" + id + "/impact", "", carol).status, 403);
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/leases/" + id + "/impact", "", dave).status, 404);

  CliResult forced = cli({"lease", "approve", id, "--force"});
  ASSERT_EQ(forced.code, 0) << forced.describe();
  EXPECT_EQ(state(), "approved");
}

TEST_F(LeaseTest, StartMissedWhileAllotdWasDownHappensWhenItIsBack) {
  startAgent("gpu-a", "sim:1xA100");
  createTeam("ml");
  const auto start =
      std::chrono::ceil<std::chrono::seconds>(system_clock::now()) + std::chrono::seconds(2);
  json created = cliJson(adminToken_, {"lease", "create", "--team", "ml", "--host", "gpu-a",
                                       "--start", isoAt(start), "--end", "+1h"});
  const std::string id = std::to_string(created.value("id", 0));
  ASSERT_EQ(cli({"lease", "approve", id}).code, 0);
  // allotd is down (killed) across the start; what it promised is in its store.
  killServer();
  ASSERT_TRUE(waitFor([&] { return system_clock::now() > start + std::chrono::seconds(1); }));
  startServer();
  json last;
  ASSERT_TRUE(waitFor([&] {
    last = httpRequest(port_, "GET", "/api/v1/hosts/gpu-a", "", adminToken_).parsed();
    return textOf(last, "admin_state") == "available" && textOf(last, "dedicated_to") == "ml";
  })) << last.dump();
  json lease = httpRequest(port_, "GET", "/api/v1/leases/" + id, "", adminToken_).parsed();
  EXPECT_EQ(textOf(lease, "state"), "active") << lease.dump();
  EXPECT_GT(textOf(lease, "started_at"), textOf(lease, "start")) << "started late, once back";
}

TEST_F(LeaseTest, BadRequestsAreRefusedNamingTheField) {
  startAgent("gpu-a", "sim:1xA100");
  const auto [carol, dave] = createTwoTeams("ml", "carol", "cv", "dave");
  json made = cliJson(adminToken_, {"lease", "create", "--team", "ml", "--host", "gpu-a", "--start",
                                    "+1h", "--end", "+2h"});
  const std::string id = std::to_string(made.value("id", 0));
  const std::string ok = R"("team":"ml","hosts":["gpu-a"],"start":"+3h")";
  const std::vector<RefusedRequest> cases = {
      {"POST", "/api/v1/leases", "{" + ok + "}", adminToken_, 400, "end"},
      {"POST", "/api/v1/leases", "{" + ok + R"(,"end":"soon"})", adminToken_, 400, "end"},
      {"POST", "/api/v1/leases", "{" + ok + R"(,"end":"+4h","count":-1})", adminToken_, 400,
       "count"},
      {"POST", "/api/v1/leases", "{" + ok + R"(,"end":"+4h","color":"red"})", adminToken_, 400,
       "color"},
      {"POST", "/api/v1/leases", "{" + ok + R"(,"end":"+2h"})", adminToken_, 400, "end"},
      {"POST", "/api/v1/leases", R"({"team":"ml","hosts":["gpu-z"],"start":"+3h","end":"+4h"})",
       adminToken_, 404, "hosts"},
      {"POST", "/api/v1/leases/x/approve", "", adminToken_, 400, "id"},
      {"POST", "/api/v1/leases/" + id + "/extend", R"({"end":"+30m"})", adminToken_, 400, "end"},
      // Another team's lease does not exist for dave; carol may not approve her own.
      {"GET", "/api/v1/leases/" + id, "", dave, 404, ""},
      {"POST", "/api/v1/leases/" + id + "/end", "", dave, 404, ""},
      {"POST", "/api/v1/leases/" + id + "/approve", "", carol, 403, ""},
  };
  expectRefused(port_, cases);
  // Nothing changed: one lease, still requested, with its end.
  json all = httpRequest(port_, "GET", "/api/v1/leases", "", adminToken_).parsed();
  ASSERT_EQ(all.size(), 1u) << all.dump();
  EXPECT_EQ(textOf(all[0], "state"), "requested");
  EXPECT_EQ(textOf(all[0], "end"), textOf(made, "end"));
  // The CLI refuses a bad time before asking.
  CliResult bad = cli(
      {"lease", "create", "--team", "ml", "--host", "gpu-a", "--start", "later", "--end", "+2h"});
  EXPECT_EQ(bad.code, 2) << bad.describe();
}

}  // namespace
}  // namespace allot::it
