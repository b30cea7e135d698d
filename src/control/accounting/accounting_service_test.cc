// The accounting service against its own interfaces, without a Cluster: a World the test fills,
// job changes handed to it as the jobs side would, and a FakeClock. What it owns: the ledger
// (an open entry when a job starts holding GPUs, a close when it stops, in the job's batch) and
// the usage reports over it, each caller seeing only what their teams used. The whole path
// through the control plane is in cluster_ledger_test.cc.

#include "control/accounting/accounting_service.h"

#include <gtest/gtest.h>

#include "control/testsupport/inventory.h"
#include "control/testsupport/principals.h"

namespace allot::control {
namespace {

using model::JobState;
using model::LedgerKind;

constexpr TimeMs kS = 1000;

class AccountingServiceTest : public ::testing::Test {
 protected:
  AccountingServiceTest() {
    for (const char* team : {"vision", "nlp"}) world_.teams[team].name = team;
    model::Host& h = world_.hosts["gpu-01"];
    h.name = "gpu-01";
    model::applyInventory(h, inventory(2));
  }

  // Job `id` of `user` in `team` moving to `state`, on both GPUs of gpu-01 while it holds them;
  // the batch the change was recorded in.
  store::WriteBatch move(int64_t id, const std::string& team, const std::string& user,
                         JobState state) {
    model::Job& j = world_.jobs[id];
    const model::Job before = j;
    j.id = id;
    j.team = team;
    j.user = user;
    j.state = state;
    if (state == JobState::kScheduled) {
      j.ranks = {{.host = "gpu-01", .gpuIndices = {0, 1}}};
      j.scheduledAt = clock_.nowMs();
    }
    store::WriteBatch batch;
    accounting_.jobChanged(before, j, batch);
    return batch;
  }
  UsageQuery since(TimeMs from, const std::string& team = "") {
    return {UsageBy::kTeam, from, clock_.nowMs() + 1, 0, team};
  }

  FakeClock clock_;
  World world_;
  AccountingService accounting_{clock_, world_, 5.0};
  Principal admin_ = testsupport::platformAdmin();
  Principal alice_ = testsupport::userIn("alice", "vision", model::Role::kMember);
  Principal bob_ = testsupport::userIn("bob", "nlp", model::Role::kMember);
};

TEST_F(AccountingServiceTest, AJobHoldingGpusIsLedgeredInItsOwnBatchAndReportedToItsTeam) {
  const TimeMs t0 = clock_.nowMs();
  EXPECT_TRUE(move(7, "vision", "alice", JobState::kQueued).empty()) << "a queued job holds none";
  store::WriteBatch placed = move(7, "vision", "alice", JobState::kScheduled);
  ASSERT_EQ(placed.ops.size(), 1u);
  const auto& open = std::get<store::AppendLedger>(placed.ops[0]).entry;
  EXPECT_EQ(open.kind, LedgerKind::kOpen);
  EXPECT_EQ(open.jobId, 7);
  EXPECT_EQ(open.gpuModel, "A100");
  EXPECT_EQ(open.gpuIndices, (std::vector<int>{0, 1}));
  EXPECT_TRUE(move(7, "vision", "alice", JobState::kRunning).empty()) << "still the same hold";

  clock_.advance(10 * kS);
  store::WriteBatch ended = move(7, "vision", "alice", JobState::kSucceeded);
  ASSERT_EQ(ended.ops.size(), 1u);
  const auto& close = std::get<store::AppendLedger>(ended.ops[0]).entry;
  EXPECT_EQ(close.kind, LedgerKind::kClose);
  EXPECT_EQ(close.ref, open.seq);
  EXPECT_EQ(close.reason, "succeeded");

  auto rows = accounting_.usage(alice_, since(t0));
  ASSERT_TRUE(rows.ok()) << rows.status().toString();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].name, "vision");
  EXPECT_EQ((*rows)[0].milliGpuMs, 2 * 1000 * 10 * kS);
  EXPECT_TRUE(accounting_.usage(bob_, since(t0))->empty()) << "nlp used nothing";
  EXPECT_EQ(accounting_.usage(admin_, since(t0))->size(), 1u);
}

TEST_F(AccountingServiceTest, AnEmptyOrBackwardWindowIsRefusedNamingFrom) {
  auto backward = accounting_.usage(alice_, {UsageBy::kTeam, 100, 100, 0, ""});
  EXPECT_EQ(backward.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(backward.status().field(), "from");
  SeriesQuery noStep{UsageBy::kTeam, 0, 100, 0, 0, ""};
  EXPECT_EQ(accounting_.usageSeries(alice_, noStep).status().field(), "step");
  Principal agent;
  agent.kind = Principal::Kind::kHost;
  agent.name = "gpu-01";
  EXPECT_EQ(accounting_.usage(agent, since(0)).status().code(), Code::kPermissionDenied);
}

TEST_F(AccountingServiceTest, AnotherTeamsUsageIsNotFoundToAMember) {
  const TimeMs t0 = clock_.nowMs();
  move(7, "vision", "alice", JobState::kScheduled);
  clock_.advance(10 * kS);
  auto named = accounting_.usage(bob_, since(t0, "vision"));
  EXPECT_EQ(named.status().code(), Code::kNotFound);
  SeriesQuery series{UsageBy::kTeam, t0, clock_.nowMs() + 1, 1000, 0, "vision"};
  EXPECT_EQ(accounting_.usageSeries(bob_, series).status().code(), Code::kNotFound);
  EXPECT_EQ(accounting_.usage(alice_, since(t0, "vision"))->size(), 1u);
}

}  // namespace
}  // namespace allot::control
