// Join tokens (limited uses, counted durably, revoked), taking a host's identity back, and what
// an agent's credential lets it report: only about its own host.

#include <gmock/gmock.h>

#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

using ::testing::HasSubstr;

class JoinTest : public DurableClusterTest {
 protected:
  void SetUp() override {
    DurableClusterTest::SetUp();
    start();
    bootstrap({"vision"});
    alice_ = keepUser("alice", "vision", model::Role::kMember);
  }
  // Restarts allotd's Cluster from what the store holds.
  void restart() {
    start();
    admin_ = *cluster_->access().authenticate(adminToken_);
  }
  std::string newToken(int uses, int64_t ttlMs = 3'600'000) {
    return keep(cluster_->hosts().createJoinToken(admin_, ttlMs, uses)).value.secret;
  }
  Result<Change<JoinedHost>> join(const std::string& secret, const std::string& name,
                                  int gpus = 1) {
    auto r = cluster_->hosts().joinHost(secret, name, inventory(gpus));
    if (r.ok()) {
      EXPECT_TRUE(store_->commit(r->batch).ok());
    }
    return r;
  }
  const model::JoinToken& only() {
    EXPECT_EQ(cluster_->world().joinTokens.size(), 1u);
    return cluster_->world().joinTokens.begin()->second;
  }

  Principal alice_;
};

TEST_F(JoinTest, AJoinTokenIsSingleUseByDefault) {
  auto made = keep(cluster_->hosts().createJoinToken(admin_, 3'600'000));
  EXPECT_EQ(made.value.token.uses, 1);
  ASSERT_TRUE(join(made.value.secret, "gpu-01").ok());
  auto second = join(made.value.secret, "gpu-02");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kUnauthenticated);
  EXPECT_THAT(second.status().message(), HasSubstr("used up"));
  EXPECT_FALSE(cluster_->world().hosts.count("gpu-02"));
}

TEST_F(JoinTest, EachJoinCountsItsUseInTheSameCommit) {
  const auto secret = newToken(2);
  auto first = join(secret, "gpu-01");
  ASSERT_TRUE(first.ok());
  // The use travels with the host and its credential: one batch, one transaction.
  const auto* put = findOp<store::PutJoinToken>(*first);
  ASSERT_NE(put, nullptr);
  EXPECT_EQ(put->token.used, 1);
  EXPECT_NE(findOp<store::PutHost>(*first), nullptr);
  ASSERT_TRUE(join(secret, "gpu-02").ok());
  EXPECT_FALSE(join(secret, "gpu-03").ok());
  EXPECT_EQ(only().used, 2);
  EXPECT_EQ(only().usesLeft(), 0);
}

TEST_F(JoinTest, UsesSurviveARestart) {
  const auto secret = newToken(2);
  ASSERT_TRUE(join(secret, "gpu-01").ok());
  restart();
  EXPECT_EQ(only().used, 1);
  ASSERT_TRUE(join(secret, "gpu-02").ok());
  restart();
  auto third = join(secret, "gpu-03");
  ASSERT_FALSE(third.ok());
  EXPECT_THAT(third.status().message(), HasSubstr("used up"));
}

TEST_F(JoinTest, ConcurrentJoinsCannotOverspendAToken) {
  // Joins run one at a time on allotd's I/O thread; the second sees the first's use in memory
  // before either is durable.
  const auto secret = newToken(1);
  auto a = cluster_->hosts().joinHost(secret, "gpu-01", inventory(1));
  auto b = cluster_->hosts().joinHost(secret, "gpu-02", inventory(1));
  EXPECT_TRUE(a.ok());
  EXPECT_FALSE(b.ok());
}

TEST_F(JoinTest, BadUsesAreRefusedNamingTheField) {
  for (int uses : {0, -1, kMaxJoinTokenUses + 1}) {
    auto r = cluster_->hosts().createJoinToken(admin_, 3'600'000, uses);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().field(), "uses");
  }
  EXPECT_TRUE(cluster_->world().joinTokens.empty());
}

TEST_F(JoinTest, OnlyPlatformAdminsListAndRevoke) {
  const auto secret = newToken(3);
  EXPECT_EQ(cluster_->hosts().createJoinToken(alice_, 3'600'000).status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(cluster_->hosts().listJoinTokens(alice_).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(cluster_->hosts().revokeJoinToken(alice_, only().id).status().code(),
            Code::kPermissionDenied);
  auto list = cluster_->hosts().listJoinTokens(admin_);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].usesLeft(), 3);
  EXPECT_EQ((*list)[0].createdBy, admin_.name);
  EXPECT_EQ(secret.find((*list)[0].hash), std::string::npos);
}

TEST_F(JoinTest, ARevokedTokenAdmitsNoOneEvenAfterARestart) {
  const auto secret = newToken(5);
  const std::string id = only().id;
  keep(cluster_->hosts().revokeJoinToken(admin_, id));
  EXPECT_EQ(cluster_->hosts().revokeJoinToken(admin_, "join-nope").status().code(),
            Code::kNotFound);
  restart();
  auto r = join(secret, "gpu-01");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("revoked"));
  EXPECT_EQ(only().usesLeft(), 0);
}

TEST_F(JoinTest, AJoinTokenCannotTakeOverAnExistingHost) {
  auto first = join(newToken(1), "gpu-01");
  ASSERT_TRUE(first.ok());
  const auto secret = newToken(1);
  auto takeover = join(secret, "gpu-01");
  ASSERT_FALSE(takeover.ok());
  EXPECT_EQ(takeover.status().code(), Code::kAlreadyExists);
  EXPECT_THAT(takeover.status().message(), HasSubstr("name: host 'gpu-01' has already joined"));
  EXPECT_THAT(takeover.status().message(), HasSubstr("allot host reset-credential gpu-01"));
  // Nothing changed: the host's own credential still works, and the token keeps its use.
  EXPECT_TRUE(cluster_->access().authenticate(first->value.credential).has_value());
  EXPECT_EQ(cluster_->world().joinTokens.at(secret.substr(0, secret.find('_'))).usesLeft(), 1);
}

TEST_F(JoinTest, AfterAResetTheNextJoinTakesTheHostOverOnce) {
  auto first = join(newToken(1), "gpu-01", 2);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(cluster_->hosts().resetHostCredential(alice_, "gpu-01").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(cluster_->hosts().resetHostCredential(admin_, "gpu-99").status().code(),
            Code::kNotFound);
  keep(cluster_->hosts().resetHostCredential(admin_, "gpu-01"));
  EXPECT_FALSE(cluster_->access().authenticate(first->value.credential).has_value());
  restart();  // the reset is durable
  EXPECT_FALSE(cluster_->access().authenticate(first->value.credential).has_value());
  auto again = join(newToken(2), "gpu-01", 2);
  ASSERT_TRUE(again.ok()) << again.status().toString();
  EXPECT_EQ(again->value.host.joinedAt, first->value.host.joinedAt);  // same host, same history
  EXPECT_TRUE(cluster_->access().authenticate(again->value.credential).has_value());
  // The reset allowed one takeover, not more.
  auto third = join(newToken(1), "gpu-01", 2);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), Code::kAlreadyExists);
}

// ---- An agent reports only about its own host -----------------------------------------------

class AgentScopeTest : public ClusterTest {};

TEST_F(AgentScopeTest, AnotherHostsJobReportsChangeNothing) {
  joinHost("gpu-a", 1);
  joinHost("gpu-b", 1);
  int64_t id = submit(alice_, 1);
  cluster_->passDurable(cluster_->schedulePass().value);
  const std::string placed = firstRank(cluster_->world().jobs.at(id)).host;
  const std::string other = placed == "gpu-a" ? "gpu-b" : "gpu-a";
  model::ActualJob exited{id, model::ActualState::kExited, 1, 0, {}, 1, 2, ""};
  auto c = cluster_->agentStatus(other, {exited});
  EXPECT_TRUE(c.batch.empty());
  EXPECT_EQ(cluster_->getJob(alice_, id)->state, JobState::kScheduled);
  model::ActualJob lost{id, model::ActualState::kLost, 0, {}, {}, 0, 0, "gone"};
  cluster_->agentConnected(other, &link_, inventory(1), {lost});
  EXPECT_EQ(cluster_->getJob(alice_, id)->state, JobState::kScheduled);
  // Output of a job placed elsewhere is not kept.
  EXPECT_EQ(cluster_->agentLog(other, {id, 0, "forged\n"}).code(), Code::kNotFound);
  EXPECT_EQ(logs_->size(id, 0), 0);
}

TEST_F(AgentScopeTest, TelemetryNamingAnotherHostIsRefused) {
  joinHost("gpu-a", 1);
  joinHost("gpu-b", 1);
  model::Telemetry t;
  t.host = "gpu-a";
  t.at = clock_.nowMs();
  t.intervalMs = 5000;
  t.gpus.push_back(model::GpuSample{});
  EXPECT_EQ(cluster_->agentTelemetry("gpu-b", t).code(), Code::kPermissionDenied);
  EXPECT_FALSE(cluster_->world().telemetry.count("gpu-a"));
}

class CommissioningScopeTest : public ClusterTest {
 protected:
  void adjustOptions(ClusterOptions& o) override { o.lifecycle.commission = true; }
};

TEST_F(CommissioningScopeTest, ATaskResultCountsOnlyForTheSendersHost) {
  joinHost("gpu-a", 1);
  joinHost("gpu-b", 1);
  // Task ids are per host: a result names no host, so whatever gpu-b sends is about gpu-b.
  model::HostTaskResult r;
  r.id = cluster_->world().hosts.at("gpu-a").task->id;
  r.ok = true;
  cluster_->hosts().agentTaskOutput("gpu-b", {r.id, 0, "forged"});
  cluster_->hosts().agentTaskResult("gpu-b", r);
  EXPECT_EQ(cluster_->world().hosts.at("gpu-a").adminState, model::AdminState::kCommissioning);
  EXPECT_TRUE(cluster_->world().hosts.at("gpu-a").task.has_value());
  EXPECT_EQ(cluster_->hosts().taskOutput(admin_, "gpu-a", 0)->data, "");
}

}  // namespace
}  // namespace allot::control
