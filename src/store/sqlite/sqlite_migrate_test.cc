#include "store/sqlite/sqlite_migrate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "store/migrations/sqlite_migrations.h"
#include "store/sqlite/sqlite_handle.h"

namespace allot::store::sqlite {
namespace {

using ::testing::HasSubstr;

DbHandle memoryDb() {
  auto db = openConnection(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  EXPECT_TRUE(db.ok()) << db.status().toString();
  return std::move(db).value();
}

bool schemaHas(sqlite3* db, const std::string& type, const std::string& name) {
  auto stmt = prepare(db, "SELECT count(*) FROM sqlite_master WHERE type = ? AND name = ?");
  EXPECT_TRUE(stmt.ok());
  Binder bind(stmt->get());
  bind.text(type);
  bind.text(name);
  EXPECT_EQ(sqlite3_step(stmt->get()), SQLITE_ROW);
  return sqlite3_column_int(stmt->get(), 0) == 1;
}

bool tableExists(sqlite3* db, const std::string& name) {
  auto stmt = prepare(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?");
  EXPECT_TRUE(stmt.ok());
  Binder bind(stmt->get());
  bind.text(name);
  EXPECT_EQ(sqlite3_step(stmt->get()), SQLITE_ROW);
  return sqlite3_column_int(stmt->get(), 0) == 1;
}

// Step 1 of every list of steps below: the table the others build on.
constexpr Migration kCreateA = {1, "a", "CREATE TABLE a (x INTEGER)"};

TEST(SqliteMigrateTest, AppliesStepsInOrderOnceEach) {
  DbHandle db = memoryDb();
  // Step 2 would fail if run twice, and depends on step 1.
  const std::vector<Migration> steps = {
      kCreateA, {2, "b", "CREATE TABLE b (y INTEGER); INSERT INTO a VALUES (1)"}};
  auto v = migrate(db.get(), steps);
  ASSERT_TRUE(v.ok()) << v.status().toString();
  EXPECT_EQ(*v, 2);
  auto again = migrate(db.get(), steps);
  ASSERT_TRUE(again.ok()) << again.status().toString();
  EXPECT_EQ(*again, 2);
  EXPECT_EQ(*pragmaInt(db.get(), "user_version"), 2);
  auto rows = prepare(db.get(), "SELECT count(*) FROM a");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(sqlite3_step(rows->get()), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(rows->get(), 0), 1);
}

TEST(SqliteMigrateTest, FailedStepLeavesNothingBehind) {
  DbHandle db = memoryDb();
  const std::vector<Migration> steps = {
      kCreateA, {2, "broken", "CREATE TABLE b (y INTEGER); THIS IS NOT SQL"}};
  auto v = migrate(db.get(), steps);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("migration 2 (broken)"));
  EXPECT_EQ(*pragmaInt(db.get(), "user_version"), 1);
  EXPECT_TRUE(tableExists(db.get(), "a"));
  EXPECT_FALSE(tableExists(db.get(), "b"));
}

TEST(SqliteMigrateTest, NewerDatabaseIsRefused) {
  DbHandle db = memoryDb();
  ASSERT_TRUE(exec(db.get(), "PRAGMA user_version = 5").ok());
  const std::vector<Migration> steps = {kCreateA};
  auto v = migrate(db.get(), steps);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(v.status().message(), HasSubstr("schema version 5 is newer"));
}

TEST(SqliteMigrateTest, MisnumberedStepsAreRejected) {
  DbHandle db = memoryDb();
  const std::vector<Migration> steps = {{1, "a", "SELECT 1"}, {3, "c", "SELECT 1"}};
  EXPECT_EQ(migrate(db.get(), steps).status().code(), Code::kInternal);
}

TEST(SqliteMigrateTest, ShippedMigrationsApplyToAFreshDatabase) {
  DbHandle db = memoryDb();
  auto v = migrate(db.get(), sqliteMigrations());
  ASSERT_TRUE(v.ok()) << v.status().toString();
  EXPECT_EQ(*v, sqliteMigrations().back().version);
  for (const char* table :
       {"teams", "users", "tokens", "projects", "join_tokens", "hosts", "jobs", "meta", "ledger"}) {
    EXPECT_TRUE(tableExists(db.get(), table)) << table;
  }
}

// Step 12 drops the indexes that no query reads (they only cost every write a page each); a
// database of step 11 keeps its rows and the indexes that queries use.
TEST(SqliteMigrateTest, UnreadIndexesAreDroppedAndRowsKept) {
  DbHandle db = memoryDb();
  const auto all = sqliteMigrations();
  ASSERT_GE(all.size(), 12u);
  ASSERT_TRUE(migrate(db.get(), all.first(11)).ok());
  EXPECT_TRUE(schemaHas(db.get(), "index", "jobs_by_state"));
  ASSERT_TRUE(
      exec(db.get(),
           "INSERT INTO jobs VALUES (7, 'n', 'vision', '', 'alice', 'queued', '', 1, 0, '{}')")
          .ok());
  auto v = migrate(db.get(), all.first(12));
  ASSERT_TRUE(v.ok()) << v.status().toString();
  EXPECT_EQ(*v, 12);
  for (const char* index : {"jobs_by_state", "jobs_by_team_state", "jobs_by_user", "jobs_by_host",
                            "ledger_by_job", "events_by_team", "events_by_job"}) {
    EXPECT_FALSE(schemaHas(db.get(), "index", index)) << index;
  }
  for (const char* index : {"audit_by_at", "tokens_by_hash", "join_tokens_by_hash"})
    EXPECT_TRUE(schemaHas(db.get(), "index", index)) << index;
  auto rows = prepare(db.get(), "SELECT id FROM jobs");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(sqlite3_step(rows->get()), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(rows->get(), 0), 7);
}

}  // namespace
}  // namespace allot::store::sqlite
