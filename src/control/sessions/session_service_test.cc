// The session service against its own interfaces, without a Cluster: a World the test fills and
// a SessionJobs that turns submissions into jobs as the jobs side would (queued, numbered) and
// records the changes the service makes. The whole path through allotd is in
// tests/integration/session_test.cc.

#include "control/sessions/session_service.h"

#include <gtest/gtest.h>

#include "control/testsupport/principals.h"

namespace allot::control {
namespace {

using model::JobState;

class RecordingJobs : public SessionJobs {
 public:
  explicit RecordingJobs(World& world) : world_(world) {}
  Result<Change<model::Job>> submitJob(const Principal& p, JobRequest r) override {
    model::Job j;
    j.id = world_.nextJobId++;
    j.name = r.name;
    j.team = r.team.empty() ? p.soleTeam() : r.team;
    j.user = p.name;
    j.command = r.command;
    j.resources.gpus = r.resources.gpus;
    j.session = r.session;
    j.state = JobState::kQueued;
    world_.jobs[j.id] = j;
    Change<model::Job> c;
    c.value = j;
    c.batch.add(store::PutJob{j});
    return c;
  }
  Result<Change<model::Job>> cancelJob(const Principal&, int64_t id) override {
    cancelled.push_back(id);
    Change<model::Job> c;
    c.value = world_.jobs.at(id);
    return c;
  }
  std::string waitReason(const model::Job&) const override { return "waiting for a GPU"; }
  void jobUpdated(model::Job& job, const model::Job&, store::WriteBatch& batch) override {
    updated.push_back(job.id);
    batch.add(store::PutJob{job});
  }
  std::vector<int64_t> cancelled;
  std::vector<int64_t> updated;

 private:
  World& world_;
};

class SessionServiceTest : public ::testing::Test {
 protected:
  SessionServiceTest() {
    for (const char* team : {"ml", "nlp"}) world_.teams[team].name = team;
    for (auto [user, team] : {std::pair{"alice", "ml"}, {"carol", "ml"}, {"bob", "nlp"}}) {
      model::User& u = world_.users[user];
      u.name = user;
      u.teams[team] = model::Role::kMember;
    }
    model::Profile jupyter;
    jupyter.name = "jupyter";
    jupyter.command = {"/usr/bin/jupyter-server"};
    jupyter.defaults.gpus = 1;
    profiles_.load({jupyter});
  }

  FakeClock clock_;
  World world_;
  ProfileService profiles_{clock_, world_.teams};
  RecordingJobs jobs_{world_};
  SessionService sessions_{clock_, world_, profiles_, jobs_, ""};
  Principal alice_ = testsupport::userIn("alice", "ml", model::Role::kMember);
  Principal carol_ = testsupport::userIn("carol", "ml", model::Role::kMember);
  Principal bob_ = testsupport::userIn("bob", "nlp", model::Role::kMember);
};

TEST_F(SessionServiceTest, ASessionIsAJobMadeFromItsProfileAndNamedForItsOwner) {
  auto first = sessions_.create(alice_, {});
  ASSERT_TRUE(first.ok()) << first.status().toString();
  EXPECT_EQ(first->value.name, "jupyter");
  EXPECT_EQ(first->value.resources.gpus, 1) << "the profile's default";
  ASSERT_TRUE(first->value.session.has_value());
  EXPECT_EQ(first->value.session->app, "jupyter-server");
  EXPECT_EQ(first->value.session->storage, "scratch");
  auto second = sessions_.create(alice_, {});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->value.name, "jupyter-2") << "names are unique among the owner's live ones";

  SessionRequest shared;
  shared.storage = "shared";
  EXPECT_EQ(sessions_.create(alice_, shared).status().code(), Code::kInvalidArgument)
      << "the profile offers scratch only";
  SessionRequest unknown;
  unknown.profile = "tensorboard";
  EXPECT_EQ(sessions_.create(alice_, unknown).status().code(), Code::kNotFound);
  EXPECT_EQ(world_.jobs.size(), 2u) << "refused requests submit nothing";
}

TEST_F(SessionServiceTest, OnlyTheOwnerAndThoseItIsSharedWithOpenIt) {
  const int64_t id = sessions_.create(alice_, {})->value.id;
  EXPECT_EQ(sessions_.open(alice_, id).status().code(), Code::kUnavailable) << "still queued";
  EXPECT_EQ(sessions_.open(carol_, id).status().code(), Code::kNotFound) << "not shared yet";
  EXPECT_EQ(sessions_.open(bob_, id).status().code(), Code::kNotFound);
  EXPECT_EQ(sessions_.share(bob_, id, {"bob"}).status().code(), Code::kNotFound)
      << "another team's session does not exist";
  EXPECT_EQ(sessions_.share(alice_, id, {"bob"}).status().code(), Code::kNotFound)
      << "sharing stays inside the team";
  ASSERT_TRUE(sessions_.share(alice_, id, {"carol"}).ok());
  EXPECT_EQ(jobs_.updated, (std::vector<int64_t>{id}));

  model::Job& j = world_.jobs.at(id);
  j.state = JobState::kRunning;
  j.ranks = {{.host = "gpu-01"}};
  model::ActualSession rt;
  rt.ready = true;
  rt.token = "jupyter-token";
  sessions_.reported(j, rt);
  auto endpoint = sessions_.open(carol_, id);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().toString();
  EXPECT_EQ(endpoint->host, "gpu-01");
  EXPECT_EQ(endpoint->token, "jupyter-token");
  EXPECT_EQ(sessions_.openSsh(carol_, id).status().code(), Code::kNotFound)
      << "a login is a shell as the owner: theirs only";

  // Carol leaves the team: her share ends with it, through the jobs side.
  model::User carol = world_.users.at("carol");
  carol.teams.clear();
  store::WriteBatch batch;
  static_cast<MembershipObserver&>(sessions_).leftTeams(carol, batch);
  EXPECT_TRUE(world_.jobs.at(id).session->sharedWith.empty());
  EXPECT_FALSE(batch.empty());

  sessions_.ended(id);
  EXPECT_FALSE(sessions_.runtime(id).has_value()) << "an ended session's runtime state goes";
}

TEST_F(SessionServiceTest, StopGoesThroughTheJobsSideAndListsCarryTheWait) {
  const int64_t id = sessions_.create(alice_, {})->value.id;
  auto listed = sessions_.list(alice_, false, true);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].reason, "waiting for a GPU");
  EXPECT_TRUE(sessions_.list(bob_, true, true).empty());
  EXPECT_EQ(sessions_.stop(bob_, id).status().code(), Code::kNotFound);
  ASSERT_TRUE(sessions_.stop(alice_, id).ok());
  EXPECT_EQ(jobs_.cancelled, (std::vector<int64_t>{id}));
}

}  // namespace
}  // namespace allot::control
