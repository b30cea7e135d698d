// Unix ids (access/unix_ids.cc): every user and team gets ids from allotd's ranges, once, and
// keeps them across restarts; the job's desired state carries them to the agent.

#include <nlohmann/json.hpp>

#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

class UnixIdsTest : public DurableClusterTest {
 protected:
  static ClusterOptions options() {
    ClusterOptions o = testOptions();
    o.unixIds = {5000, 5002, 7000, 7001};
    return o;
  }
  void SetUp() override {
    DurableClusterTest::SetUp();
    start(options());
    bootstrap();
  }
  const model::User& user(const std::string& name) { return cluster_->world().users.at(name); }
  const model::Team& team(const std::string& name) { return cluster_->world().teams.at(name); }
};

TEST_F(UnixIdsTest, UsersAndTeamsGetIdsFromTheirRangesOnceAndKeepThemAcrossRestarts) {
  EXPECT_EQ(user("admin").uid, 5000);
  keep(cluster_->access().createTeam(admin_, "red"));
  keep(cluster_->access().createUser(admin_, "alice", "red", model::Role::kMember));
  EXPECT_EQ(team("red").gid, 7000);
  EXPECT_EQ(user("alice").uid, 5001);
  EXPECT_EQ(user("alice").gid, 5001);  // user-private group

  start(options());  // allotd restarts
  EXPECT_EQ(user("alice").uid, 5001);
  EXPECT_EQ(team("red").gid, 7000);
  EXPECT_FALSE(cluster_->access().assignMissingUnixIds().has_value());
  keep(cluster_->access().createUser(admin_, "bob", "red", model::Role::kMember));
  EXPECT_EQ(user("bob").uid, 5002);  // the next one, never alice's again

  // The range is spent: the account is refused, and nothing changes.
  auto carol = cluster_->access().createUser(admin_, "carol", "red", model::Role::kMember);
  ASSERT_FALSE(carol.ok());
  EXPECT_NE(carol.status().message().find("uid_min..uid_max"), std::string::npos);
  EXPECT_FALSE(cluster_->world().users.count("carol"));
}

TEST_F(UnixIdsTest, UsersStoredWithoutIdsGetThemOnceAtStart) {
  // A user stored before allotd handed out ids.
  model::User old;
  old.name = "old";
  old.teams["red"] = model::Role::kMember;
  model::Team red;
  red.name = "red";
  store::WriteBatch b;
  b.add(store::PutUser{old}).add(store::PutTeam{red});
  ASSERT_TRUE(store_->commit(b).ok());
  start(options());
  EXPECT_EQ(user("old").uid, -1);
  auto ids = cluster_->access().assignMissingUnixIds();
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(ids->value, 2);
  keep(*ids);
  EXPECT_EQ(user("old").uid, 5001);  // after admin's 5000
  EXPECT_EQ(team("red").gid, 7000);
  start(options());
  EXPECT_EQ(user("old").uid, 5001);
  EXPECT_EQ(team("red").gid, 7000);
  EXPECT_FALSE(cluster_->access().assignMissingUnixIds().has_value());
}

TEST_F(UnixIdsTest, DirectoryIdsInsideAllotsRangesOrHeldByAnotherAreRefused) {
  keep(cluster_->access().createTeam(admin_, "red"));
  keep(cluster_->access().createUser(admin_, "alice", "red", model::Role::kMember));
  EXPECT_TRUE(cluster_->access().checkDirectoryIds("dora", 10001, 10001).ok());
  EXPECT_FALSE(cluster_->access().checkDirectoryIds("dora", 5001, 10001).ok());  // allotd's range
  EXPECT_FALSE(
      cluster_->access().checkDirectoryIds("dora", 10001, 7000).ok());    // a team gid's range
  EXPECT_FALSE(cluster_->access().checkDirectoryIds("dora", 0, 0).ok());  // root
  // Past 32 bits a host's setuid would cut it to another user's id, or root's group (a review).
  EXPECT_FALSE(
      cluster_->access().checkDirectoryIds("dora", (int64_t{1} << 32) + 10001, 10001).ok());
  EXPECT_FALSE(cluster_->access().checkDirectoryIds("dora", 10001, int64_t{1} << 32).ok());
  EXPECT_FALSE(cluster_->access().checkDirectoryIds("dora", -5, 10001).ok());

  // A directory user keeps its own ids and uses none of allotd's.
  NewUser dora;
  dora.name = "dora";
  dora.teams["red"] = model::Role::kMember;
  dora.uid = 10001;
  dora.gid = 10001;
  keep(cluster_->access().createUser(admin_, dora));
  EXPECT_EQ(user("dora").uid, 10001);
  keep(cluster_->access().createUser(admin_, "erin", "red", model::Role::kMember));
  EXPECT_EQ(user("erin").uid, 5002);
  NewUser clash = dora;
  clash.name = "frank";  // the same uid as dora's
  EXPECT_FALSE(cluster_->access().createUser(admin_, clash).ok());
  clash.uid = clash.gid = 5001;  // inside allotd's range
  EXPECT_FALSE(cluster_->access().createUser(admin_, clash).ok());
  EXPECT_FALSE(cluster_->world().users.count("frank"));
}

TEST_F(UnixIdsTest, TheDesiredStateCarriesTheOwnersIdentity) {
  keep(cluster_->access().createTeam(admin_, "red"));
  Principal p = keepUser("alice", "red", model::Role::kMember);
  keepJoinedHost("h1", 1);
  JobRequest r;
  r.command = {"true"};
  r.resources.gpus = 1;
  keep(cluster_->submitJob(p, r));
  auto pass = cluster_->schedulePass();
  cluster_->passDurable(pass.value);
  auto desired = nlohmann::json::parse(cluster_->desiredMessage("h1"));
  ASSERT_EQ(desired["jobs"].size(), 1u) << desired.dump();
  auto runAs = model::runAsFromJson(desired["jobs"][0]["run_as"]);
  ASSERT_TRUE(runAs.ok()) << desired.dump();
  EXPECT_EQ(runAs->user, "alice");
  EXPECT_EQ(runAs->uid, user("alice").uid);
  EXPECT_EQ(runAs->gid, user("alice").gid);
  EXPECT_EQ(runAs->team, "red");
  EXPECT_EQ(runAs->teamGid, team("red").gid);
}

}  // namespace
}  // namespace allot::control
