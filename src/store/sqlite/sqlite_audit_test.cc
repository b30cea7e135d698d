// The audit log in the SQLite store: appended with ids in commit order, read back through
// queryAudit with every filter, never changed or removed.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/sqlite/sqlite_rows.h"
#include "store/sqlite/sqlite_store.h"
#include "store/sqlite/sqlite_test_support.h"

namespace allot::store {
namespace {

using test::execOnFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

class SqliteAuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = SqliteStore::open(path_);
    ASSERT_TRUE(store.ok()) << store.status().toString();
    store_ = std::move(store).value();
  }
  void TearDown() override { store_.reset(); }

  static model::AuditEntry entry(TimeMs at, std::string actor, std::string object) {
    model::AuditEntry e;
    e.at = at;
    e.actor = std::move(actor);
    e.actorKind = "user";
    e.address = "10.0.0.7";
    e.action = "POST /api/v1/hosts/{name}/drain";
    e.object = std::move(object);
    e.status = 200;
    e.request = R"({"deadline":"30m"})";
    e.before = R"({"admin_state":"available"})";
    e.after = R"({"admin_state":"draining"})";
    return e;
  }

  std::vector<int64_t> ids(const AuditQuery& q) {
    auto got = store_->queryAudit(q);
    EXPECT_TRUE(got.ok()) << got.status().toString();
    std::vector<int64_t> out;
    if (got.ok())
      for (const auto& e : *got) out.push_back(e.id);
    return out;
  }

  test::ScratchDir dir_{"allot-audit-test"};
  const std::string path_ = dir_.file("allot.db");
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteAuditTest, EntriesRoundTripWithIdsInCommitOrder) {
  ASSERT_TRUE(
      store_->commit(WriteBatch{}.add(AppendAudit{entry(1'000, "root", "host:gpu-01")})).ok());
  ASSERT_TRUE(store_->commit(WriteBatch{}.add(AppendAudit{entry(2'000, "alice", "job:42")})).ok());
  auto got = store_->queryAudit(AuditQuery{});
  ASSERT_TRUE(got.ok()) << got.status().toString();
  ASSERT_EQ(got->size(), 2u);
  const model::AuditEntry& e = (*got)[0];
  EXPECT_EQ(e.id, 1);
  EXPECT_EQ(e.at, 1'000);
  EXPECT_EQ(e.actor, "root");
  EXPECT_EQ(e.actorKind, "user");
  EXPECT_EQ(e.address, "10.0.0.7");
  EXPECT_EQ(e.action, "POST /api/v1/hosts/{name}/drain");
  EXPECT_EQ(e.object, "host:gpu-01");
  EXPECT_EQ(e.status, 200);
  EXPECT_EQ(e.request, R"({"deadline":"30m"})");
  EXPECT_EQ(e.before, R"({"admin_state":"available"})");
  EXPECT_EQ(e.after, R"({"admin_state":"draining"})");
  EXPECT_EQ((*got)[1].id, 2);
  EXPECT_EQ((*got)[1].actor, "alice");
}

TEST_F(SqliteAuditTest, EntriesSurviveReopeningAndAreNotPartOfLoadAll) {
  ASSERT_TRUE(store_->commit(WriteBatch{}.add(AppendAudit{entry(1'000, "root", "team:ml")})).ok());
  store_.reset();
  auto reopened = SqliteStore::open(path_);
  ASSERT_TRUE(reopened.ok());
  store_ = std::move(reopened).value();
  EXPECT_THAT(ids(AuditQuery{}), ElementsAre(1));
  ASSERT_TRUE(store_->commit(WriteBatch{}.add(AppendAudit{entry(2'000, "root", "team:ml")})).ok());
  EXPECT_THAT(ids(AuditQuery{}), ElementsAre(1, 2));
}

TEST_F(SqliteAuditTest, QueryFiltersByTimeActorObjectAndPages) {
  WriteBatch batch;
  batch.add(AppendAudit{entry(1'000, "root", "host:gpu-01")});            // 1
  batch.add(AppendAudit{entry(2'000, "alice", "host:gpu-01/gpu:3")});     // 2
  batch.add(AppendAudit{entry(3'000, "root", "host:gpu-010")});           // 3
  batch.add(AppendAudit{entry(4'000, "bob", "team:ml/project:vision")});  // 4
  batch.add(AppendAudit{entry(5'000, "root", "team:ml")});                // 5
  batch.add(AppendAudit{entry(6'000, "alice", "host_gpu-01")});           // 6
  batch.add(AppendAudit{entry(7'000, "bob", "host:gpu-01-b")});           // 7
  ASSERT_TRUE(store_->commit(std::move(batch)).ok());

  EXPECT_THAT(ids({.since = 2'000, .until = 5'000}), ElementsAre(2, 3, 4));
  EXPECT_THAT(ids({.actor = "alice"}), ElementsAre(2, 6));
  // The object and what is under it; not another object whose name merely starts the same.
  EXPECT_THAT(ids({.object = "host:gpu-01"}), ElementsAre(1, 2));
  EXPECT_THAT(ids({.object = "team:ml"}), ElementsAre(4, 5));
  EXPECT_THAT(ids({.object = "host_gpu-01"}), ElementsAre(6));
  EXPECT_THAT(ids({.actor = "root", .object = "host:gpu-01"}), ElementsAre(1));
  // Paging both ways.
  EXPECT_THAT(ids({.afterId = 2, .limit = 2}), ElementsAre(3, 4));
  EXPECT_THAT(ids({.newestFirst = true, .limit = 2}), ElementsAre(7, 6));
  EXPECT_THAT(ids({.beforeId = 5, .newestFirst = true, .limit = 2}), ElementsAre(4, 3));
  EXPECT_THAT(ids({.since = 8'000}), ElementsAre());
  EXPECT_THAT(ids({.since = 2'000, .until = 5'000, .beforeId = 4, .newestFirst = true}),
              ElementsAre(3, 2));
}

// The query plan SQLite makes of each kind of search, read on the file through a connection of
// the test's own: a search by actor or by object goes to its index, not through the whole log.
std::string planOf(const std::string& path, const AuditQuery& q) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  const std::string sql = "EXPLAIN QUERY PLAN " + sqlite::auditQuerySql(q);
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  std::string plan;
  while (s != nullptr && sqlite3_step(s) == SQLITE_ROW)
    plan += std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, 3))) + "; ";
  sqlite3_finalize(s);
  sqlite3_close(db);
  return plan;
}

TEST_F(SqliteAuditTest, SearchesByActorAndObjectUseTheirIndexes) {
  EXPECT_THAT(planOf(path_, {.actor = "alice"}), HasSubstr("INDEX audit_by_actor"));
  EXPECT_THAT(planOf(path_, {.actor = "alice", .newestFirst = true, .limit = 10}),
              HasSubstr("INDEX audit_by_actor"));
  EXPECT_THAT(planOf(path_, {.object = "host:gpu-01"}), HasSubstr("INDEX audit_by_object"));
  EXPECT_THAT(planOf(path_, {.object = "host:gpu-01", .beforeId = 9, .newestFirst = true}),
              HasSubstr("INDEX audit_by_object"));
}

TEST_F(SqliteAuditTest, TheAuditLogRefusesUpdatesAndDeletes) {
  ASSERT_TRUE(store_->commit(WriteBatch{}.add(AppendAudit{entry(1'000, "root", "team:ml")})).ok());
  EXPECT_THAT(execOnFile(path_, "UPDATE audit SET actor = 'someone else'"),
              Optional(HasSubstr("append-only")));
  EXPECT_THAT(execOnFile(path_, "DELETE FROM audit"), Optional(HasSubstr("append-only")));
  auto got = store_->queryAudit(AuditQuery{});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].actor, "root");
}

}  // namespace
}  // namespace allot::store
