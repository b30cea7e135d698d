// What a failed durable write does (docs/architecture.md, "A failed durable write"): allotd
// already holds the change in memory and cannot take it back, so it stops before anyone is told
// the change happened; a restart serves what the disk holds.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "api/server.h"
#include "common/clock.h"
#include "common/http_client.h"
#include "common/log.h"
#include "common/secrets.h"
#include "store/fault_injecting_store.h"
#include "store/sqlite/sqlite_store.h"

namespace allot::api {
namespace {

class CommitFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    initSecrets();
    dir_ = std::filesystem::temp_directory_path() /
           ("allot-commit-failure-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    cfg_.dataDir = dir_.string();
    cfg_.listenAddress = "127.0.0.1";
    cfg_.port = 0;
    auto first = start(openStore());  // the admin and its token, durable
    ASSERT_TRUE(first->newAdminToken().has_value());
    token_ = *first->newAdminToken();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<store::Store> openStore() {
    return std::move(store::SqliteStore::open((dir_ / "allot.db").string())).value();
  }
  std::unique_ptr<Server> start(std::unique_ptr<store::Store> store) {
    return std::move(Server::create(cfg_, clock_, std::move(store))).value();
  }
  bool teamOnDisk(const std::string& name) {
    auto contents = openStore()->loadAll();
    for (const auto& t : contents->teams)
      if (t.name == name) return true;
    return false;
  }

  // POSTs a new team to an allotd serving `store` on a loopback port; the reply, if any.
  Result<HttpResponse> createTeam(std::unique_ptr<store::Store> store, const std::string& name) {
    auto server = start(std::move(store));
    const uint16_t port = server->listen().value();
    std::thread serving([&] { server->run(false); });
    auto client =
        std::move(HttpClient::create("http://127.0.0.1:" + std::to_string(port), token_)).value();
    auto reply = client->request("POST", "/api/v1/teams", R"({"name":")" + name + R"("})");
    server->stop();
    serving.join();
    return reply;
  }
  // allotd, on a store that refuses the batches `refuse` holds for, creates team `name`: in a
  // death test's child, it must abort on the refused batch, never reply. The default ("fast")
  // style: the child is a fork of this process, so it has this fixture's data directory and
  // token, and only this thread (SetUp's server is gone) is forked.
  void expectAbortBeforeAcknowledging(store::FaultInjectingStore::Fault refuse,
                                      const std::string& name) {
    EXPECT_EXIT(
        {
          auto faulty = std::make_unique<store::FaultInjectingStore>(openStore());
          faulty->failIf(std::move(refuse));
          setupLogging("allotd", "info", false);  // to stderr, which the check reads
          auto reply = createTeam(std::move(faulty), name);
          std::fprintf(stderr, "allotd replied %d\n", reply.ok() ? reply->status : -1);
          std::_Exit(0);
        },
        ::testing::KilledBySignal(SIGABRT), "durable write failed, exiting");
  }

  SystemClock clock_;
  std::filesystem::path dir_;
  ServerConfig cfg_;
  std::string token_;
};

TEST_F(CommitFailureTest, AllotdStopsBeforeAcknowledgingAWriteTheDiskRefused) {
  expectAbortBeforeAcknowledging(store::FaultInjectingStore::holds<store::PutTeam>, "doomed");
  // Nothing of the refused batch is on disk, and allotd starts again from what is.
  EXPECT_FALSE(teamOnDisk("doomed"));
  auto again = start(openStore());
  EXPECT_FALSE(again->newAdminToken().has_value());  // the same admin, from the disk
}

// A change and the audit entry that records it are one batch: no crash can leave one without
// the other. The audit entry's batch refused, the change is not on disk either.
TEST_F(CommitFailureTest, AChangeAndItsAuditEntryAreOneWrite) {
  expectAbortBeforeAcknowledging(store::FaultInjectingStore::holds<store::AppendAudit>,
                                 "unaudited");
  EXPECT_FALSE(teamOnDisk("unaudited"));

  // And as it goes when the disk takes it: the batch that holds the team holds its entry.
  auto watching = std::make_unique<store::FaultInjectingStore>(openStore());
  std::vector<std::pair<bool, bool>> batches;  // (holds a PutTeam, holds an AppendAudit)
  watching->failIf([&](const store::WriteBatch& b) {
    batches.emplace_back(store::FaultInjectingStore::holds<store::PutTeam>(b),
                         store::FaultInjectingStore::holds<store::AppendAudit>(b));
    return false;  // watches, never fails
  });
  auto reply = createTeam(std::move(watching), "audited");
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->status, 201) << reply->body;
  EXPECT_TRUE(teamOnDisk("audited"));
  int teamBatches = 0;
  for (const auto& [team, audit] : batches) {
    if (!team) continue;
    ++teamBatches;
    EXPECT_TRUE(audit);
  }
  EXPECT_EQ(teamBatches, 1);
}

// The wrapper itself: a batch it fails is not written; the others are.
TEST_F(CommitFailureTest, TheFaultInjectingStoreWritesOnlyWhatItLetsThrough) {
  store::FaultInjectingStore s(openStore());
  ASSERT_TRUE(s.loadAll().ok());
  model::Team kept, lost;
  kept.name = "kept";
  lost.name = "lost";
  s.failIf([](const store::WriteBatch& b) {
    return std::get<store::PutTeam>(b.ops.front()).team.name == "lost";
  });
  EXPECT_TRUE(s.commit(store::WriteBatch{}.add(store::PutTeam{kept})).ok());
  EXPECT_EQ(s.commit(store::WriteBatch{}.add(store::PutTeam{lost})).code(), Code::kUnavailable);
  EXPECT_EQ(s.failed(), 1);
  s.heal();
  EXPECT_TRUE(teamOnDisk("kept"));
  EXPECT_FALSE(teamOnDisk("lost"));
}

}  // namespace
}  // namespace allot::api
