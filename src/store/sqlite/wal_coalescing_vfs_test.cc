#include "store/sqlite/wal_coalescing_vfs.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <vector>

#include "store/sqlite/sqlite_handle.h"
#include "store/sqlite/sqlite_test_support.h"

namespace allot::store::sqlite {
namespace {

// Under the coalescing VFS in these tests: SQLite's default VFS, whose database and WAL files
// count the writes that reach them and can be made to fail.
struct Writes {
  std::vector<int> sizes;
  int failWith = SQLITE_OK;
};
Writes walWrites;
Writes dbWrites;
sqlite3_vfs countingVfs;
sqlite3_io_methods countingWalMethods;
sqlite3_io_methods countingDbMethods;
const sqlite3_io_methods* defaultWalMethods = nullptr;
const sqlite3_io_methods* defaultDbMethods = nullptr;

int countedWrite(Writes& writes, const sqlite3_io_methods* methods, sqlite3_file* f,
                 const void* data, int amount, sqlite3_int64 offset) {
  writes.sizes.push_back(amount);
  if (writes.failWith != SQLITE_OK) return writes.failWith;
  return methods->xWrite(f, data, amount, offset);
}

int countingWalWrite(sqlite3_file* f, const void* data, int amount, sqlite3_int64 offset) {
  return countedWrite(walWrites, defaultWalMethods, f, data, amount, offset);
}

int countingDbWrite(sqlite3_file* f, const void* data, int amount, sqlite3_int64 offset) {
  return countedWrite(dbWrites, defaultDbMethods, f, data, amount, offset);
}

int countingOpen(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out) {
  sqlite3_vfs* base = sqlite3_vfs_find(nullptr);
  const int rc = base->xOpen(base, name, f, flags, out);
  if (rc != SQLITE_OK || f->pMethods == nullptr) return rc;
  if ((flags & SQLITE_OPEN_WAL) != 0) {
    defaultWalMethods = f->pMethods;
    countingWalMethods = *f->pMethods;
    countingWalMethods.xWrite = countingWalWrite;
    f->pMethods = &countingWalMethods;
  } else if ((flags & SQLITE_OPEN_MAIN_DB) != 0) {
    defaultDbMethods = f->pMethods;
    countingDbMethods = *f->pMethods;
    countingDbMethods.xWrite = countingDbWrite;
    f->pMethods = &countingDbMethods;
  }
  return rc;
}

constexpr const char* kCounting = "allot-test-counting";
constexpr const char* kCoalescingOverCounting = "allot-test-coalescing-over-counting";

void registerTestVfses() {
  static bool done = [] {
    countingVfs = *sqlite3_vfs_find(nullptr);
    countingVfs.zName = kCounting;
    countingVfs.pNext = nullptr;
    countingVfs.xOpen = countingOpen;
    EXPECT_EQ(sqlite3_vfs_register(&countingVfs, 0), SQLITE_OK);
    EXPECT_EQ(registerWalCoalescingVfs(kCoalescingOverCounting, &countingVfs), SQLITE_OK);
    return true;
  }();
  (void)done;
}

class WalCoalescingVfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registerTestVfses();
    walWrites = {};
    dbWrites = {};
  }
  void TearDown() override {
    walWrites = {};
    dbWrites = {};
  }

  // A connection in WAL mode with synchronous = FULL, through `vfs`, on a table `t`.
  DbHandle openDb(const char* vfs, const std::string& path) {
    auto db = openConnection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs);
    EXPECT_TRUE(db.ok()) << db.status().toString();
    if (!db.ok()) return nullptr;
    EXPECT_TRUE(exec(db->get(),
                     "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; "
                     "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)")
                    .ok());
    return std::move(db).value();
  }

  static Status insertRows(sqlite3* db, int rows, int bytes) {
    return exec(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
                        std::to_string(rows) + ") INSERT INTO t(v) SELECT randomblob(" +
                        std::to_string(bytes) + ") FROM n");
  }

  static int64_t rowsOn(const std::string& path) {
    auto db = openConnection(path, SQLITE_OPEN_READONLY);
    if (!db.ok()) return -1;
    auto stmt = prepare(db->get(), "SELECT count(*) FROM t");
    if (!stmt.ok() || sqlite3_step(stmt->get()) != SQLITE_ROW) return -1;
    return sqlite3_column_int64(stmt->get(), 0);
  }

  static std::string integrity(const std::string& path) {
    auto db = openConnection(path, SQLITE_OPEN_READONLY);
    if (!db.ok()) return db.status().toString();
    auto text = pragmaText(db->get(), "integrity_check");
    return text.ok() ? *text : text.status().toString();
  }

  // A transaction in progress whose pages spill into the WAL (a small page cache) before it
  // commits.
  static Status spillATransaction(sqlite3* db) {
    ALLOT_RETURN_IF_ERROR(exec(db, "PRAGMA cache_size = 8; BEGIN"));
    return insertRows(db, 300, 1000);
  }

  // A connection through the coalescing VFS with ten rows committed and such a transaction.
  DbHandle openWithASpilledTransaction(const std::string& path) {
    auto db = openDb(kCoalescingOverCounting, path);
    if (db == nullptr) return nullptr;
    EXPECT_TRUE(insertRows(db.get(), 10, 500).ok());
    EXPECT_TRUE(spillATransaction(db.get()).ok());
    return db;
  }

  test::ScratchDir dir_{"allot-wal-coalescing"};
};

TEST_F(WalCoalescingVfsTest, ACommitsFramesReachTheWalInOneWrite) {
  // Without coalescing: two writes a frame, the frame's header and its page.
  const std::string plain = dir_.file("plain.db");
  auto db = openDb(kCounting, plain);
  ASSERT_NE(db, nullptr);
  walWrites = {};
  ASSERT_TRUE(insertRows(db.get(), 40, 2000).ok());
  const size_t plainWrites = walWrites.sizes.size();
  EXPECT_GE(plainWrites, 40u);

  const std::string path = dir_.file("coalesced.db");
  db = openDb(kCoalescingOverCounting, path);
  ASSERT_NE(db, nullptr);
  walWrites = {};
  ASSERT_TRUE(insertRows(db.get(), 40, 2000).ok());
  EXPECT_EQ(walWrites.sizes.size(), 1u) << "against " << plainWrites << " without";
  // Another connection, through SQLite's own VFS, reads it at once: it was in the file by the
  // commit's sync.
  EXPECT_EQ(rowsOn(path), 40);
  ASSERT_TRUE(insertRows(db.get(), 1, 10).ok());
  EXPECT_EQ(rowsOn(path), 41);
}

TEST_F(WalCoalescingVfsTest, ALargeTransactionIsWrittenInBoundedPieces) {
  const std::string path = dir_.file("large.db");
  auto db = openDb(kCoalescingOverCounting, path);
  ASSERT_NE(db, nullptr);
  walWrites = {};
  Status inserted = insertRows(db.get(), 1500, 2000);  // about 3 MiB of pages
  ASSERT_TRUE(inserted.ok()) << inserted.toString();
  EXPECT_GE(walWrites.sizes.size(), 3u * 1024 * 1024 / kCoalescedWriteBytes);
  for (int size : walWrites.sizes) EXPECT_LE(size, kCoalescedWriteBytes);
  EXPECT_EQ(rowsOn(path), 1500);
  EXPECT_EQ(integrity(path), "ok");
}

// The database file is written as SQLite writes it: a checkpoint that stops short of the WAL's
// end lets readers at the pages it wrote without a sync (wal_coalescing_vfs.cc, vfsOpen).
TEST_F(WalCoalescingVfsTest, ACheckpointWritesTheDatabaseAsSQLiteDoes) {
  const std::string path = dir_.file("checkpoint-writes.db");
  auto db = openDb(kCoalescingOverCounting, path);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(insertRows(db.get(), 200, 2000).ok());  // about 100 pages
  ASSERT_TRUE(exec(db.get(), "PRAGMA wal_checkpoint(TRUNCATE)").ok());
  EXPECT_GE(dbWrites.sizes.size(), 100u);
  for (int size : dbWrites.sizes) EXPECT_EQ(size, 4096);
  EXPECT_EQ(rowsOn(path), 200);
}

TEST_F(WalCoalescingVfsTest, ACheckpointWhoseWritesFailLeavesTheWalInCharge) {
  const std::string path = dir_.file("checkpoint.db");
  auto db = openDb(kCoalescingOverCounting, path);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(insertRows(db.get(), 200, 2000).ok());
  dbWrites.failWith = SQLITE_IOERR_WRITE;
  EXPECT_FALSE(exec(db.get(), "PRAGMA wal_checkpoint(TRUNCATE)").ok());
  dbWrites.failWith = SQLITE_OK;
  EXPECT_GT(std::filesystem::file_size(path + "-wal"), 0u);
  EXPECT_EQ(rowsOn(path), 200);
  ASSERT_TRUE(insertRows(db.get(), 10, 100).ok());
  ASSERT_TRUE(exec(db.get(), "PRAGMA wal_checkpoint(TRUNCATE)").ok());
  EXPECT_EQ(std::filesystem::file_size(path + "-wal"), 0u);
  db.reset();
  EXPECT_EQ(rowsOn(path), 210);
  EXPECT_EQ(integrity(path), "ok");
}

TEST_F(WalCoalescingVfsTest, AWriteThatFailsFailsItsCommitAndChangesNothing) {
  const std::string path = dir_.file("failing.db");
  auto db = openDb(kCoalescingOverCounting, path);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(insertRows(db.get(), 10, 500).ok());

  walWrites.failWith = SQLITE_IOERR_WRITE;
  EXPECT_FALSE(insertRows(db.get(), 10, 500).ok());
  walWrites.failWith = SQLITE_OK;
  if (sqlite3_get_autocommit(db.get()) == 0) (void)exec(db.get(), "ROLLBACK");
  EXPECT_EQ(rowsOn(path), 10);

  // The failure is not reported again: the next commit goes through, after the ten before.
  ASSERT_TRUE(insertRows(db.get(), 5, 500).ok());
  EXPECT_EQ(rowsOn(path), 15);
  db.reset();
  EXPECT_EQ(rowsOn(path), 15);
  EXPECT_EQ(integrity(path), "ok");
}

// The WAL's own file, as SQLite holds it (our VFS's file), to call its methods as SQLite would.
sqlite3_file* walOf(sqlite3* db) {
  sqlite3_file* wal = nullptr;
  EXPECT_EQ(sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal), SQLITE_OK);
  EXPECT_NE(wal, nullptr);
  return wal;
}

// Calls `call` while writes to WAL files fail; how many writes it tried.
template <typename Call>
size_t whileWritesFail(Call call) {
  walWrites = {};
  walWrites.failWith = SQLITE_IOERR_WRITE;
  call();
  walWrites.failWith = SQLITE_OK;
  return walWrites.sizes.size();
}

// A write that fails when a file control needs what is pending: SQLite may not act on a file
// control's result, so the commit's sync reports it.
TEST_F(WalCoalescingVfsTest, AWriteAFileControlFindsFailingFailsTheCommit) {
  const std::string path = dir_.file("file-control.db");
  auto db = openWithASpilledTransaction(path);
  ASSERT_NE(db, nullptr);
  sqlite3_file* wal = walOf(db.get());
  ASSERT_NE(wal, nullptr);
  int moved = 0;
  ASSERT_EQ(whileWritesFail([&] {
              (void)wal->pMethods->xFileControl(wal, SQLITE_FCNTL_HAS_MOVED, &moved);
            }),
            1u)
      << "nothing was pending";
  EXPECT_FALSE(exec(db.get(), "COMMIT").ok());
  if (sqlite3_get_autocommit(db.get()) == 0) (void)exec(db.get(), "ROLLBACK");
  EXPECT_EQ(rowsOn(path), 10);
  ASSERT_TRUE(insertRows(db.get(), 5, 500).ok());
  EXPECT_EQ(rowsOn(path), 15);
  EXPECT_EQ(integrity(path), "ok");
}

// A write that fails when a size is asked for goes back to SQLite with that call, which then
// abandons the transaction; the next transaction is not failed for it again.
TEST_F(WalCoalescingVfsTest, AWriteFailureSQLiteWasToldOfIsNotReportedAgain) {
  const std::string path = dir_.file("told.db");
  auto db = openWithASpilledTransaction(path);
  ASSERT_NE(db, nullptr);
  sqlite3_file* wal = walOf(db.get());
  ASSERT_NE(wal, nullptr);
  sqlite3_int64 size = 0;
  int rc = SQLITE_OK;
  ASSERT_EQ(whileWritesFail([&] { rc = wal->pMethods->xFileSize(wal, &size); }), 1u)
      << "nothing was pending";
  EXPECT_EQ(rc, SQLITE_IOERR_WRITE);
  ASSERT_TRUE(exec(db.get(), "ROLLBACK").ok());
  ASSERT_TRUE(insertRows(db.get(), 5, 500).ok());
  EXPECT_EQ(rowsOn(path), 15);
  EXPECT_EQ(integrity(path), "ok");
}

// A rolled-back transaction's spilled frames, past the last commit, are dropped when the write lock
// is released. Written later, they would land on the frames another writer committed there since.
TEST_F(WalCoalescingVfsTest, WhatARolledBackTransactionLeftIsNeverWritten) {
  const std::string path = dir_.file("rolled-back.db");
  auto db = openDb(kCoalescingOverCounting, path);
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(insertRows(db.get(), 10, 500).ok());
  // An empty WAL: the rollback then reads its pages back from the database file alone, and
  // nothing reads the WAL (which would write what is pending) before the write lock goes.
  ASSERT_TRUE(exec(db.get(), "PRAGMA wal_checkpoint(TRUNCATE)").ok());
  ASSERT_TRUE(spillATransaction(db.get()).ok());
  ASSERT_TRUE(exec(db.get(), "ROLLBACK").ok());
  walWrites = {};
  {
    auto other = openConnection(path, SQLITE_OPEN_READWRITE);  // SQLite's own VFS
    ASSERT_TRUE(other.ok()) << other.status().toString();
    ASSERT_TRUE(insertRows(other->get(), 200, 1000).ok());
  }
  // Reading through the first connection reads the WAL through its file.
  auto stmt = prepare(db.get(), "SELECT count(*) FROM t");
  ASSERT_TRUE(stmt.ok());
  ASSERT_EQ(sqlite3_step(stmt->get()), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int64(stmt->get(), 0), 210);
  stmt->reset();  // finalized: the read ends
  EXPECT_TRUE(walWrites.sizes.empty());
  EXPECT_EQ(rowsOn(path), 210);
  EXPECT_EQ(integrity(path), "ok");
}

TEST_F(WalCoalescingVfsTest, AWalWithoutPowerSafeOverwriteIsNotCoalesced) {
  const std::string path = dir_.file("no-psow.db");
  auto db = openConnection("file:" + path + "?psow=0",
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
                           kCoalescingOverCounting);
  ASSERT_TRUE(db.ok()) << db.status().toString();
  ASSERT_TRUE(exec(db->get(),
                   "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; "
                   "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
                  .ok());
  walWrites = {};
  ASSERT_TRUE(insertRows(db->get(), 40, 2000).ok());
  EXPECT_GE(walWrites.sizes.size(), 40u);
  EXPECT_EQ(rowsOn(path), 40);
}

// What a crash leaves: the commits made, and none of the transaction that was being written, whose
// frames were partly written (a small page cache spills them before the commit) and partly, with
// this VFS, only in memory. A guard: SQLite's own VFS passes it too.
TEST_F(WalCoalescingVfsTest, ACrashLeavesTheCommitsAndNothingOfTheTransactionInProgress) {
  const std::string path = dir_.file("crash.db");
  auto db = openDb(kCoalescingOverCounting, path);
  ASSERT_NE(db, nullptr);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(insertRows(db.get(), 20, 1000).ok());
  ASSERT_TRUE(exec(db.get(), "PRAGMA cache_size = 8; BEGIN").ok());
  walWrites = {};
  ASSERT_TRUE(insertRows(db.get(), 1500, 1000).ok());  // 1.5 MB: more than is ever held
  EXPECT_GE(walWrites.sizes.size(), 1u);               // spilled pages went out before any commit

  test::ScratchDir crash("allot-wal-coalescing-crash");
  const std::string image = crash.file("crash.db");
  std::filesystem::copy_file(path, image);
  std::filesystem::copy_file(path + "-wal", image + "-wal");
  EXPECT_EQ(rowsOn(image), 100);
  EXPECT_EQ(integrity(image), "ok");

  ASSERT_TRUE(exec(db.get(), "COMMIT").ok());
  EXPECT_EQ(rowsOn(path), 1600);
}

TEST_F(WalCoalescingVfsTest, OnlyAWriterWhoseEveryCommitSyncsCoalesces) {
  const auto vfsOf = [](sqlite3* db) {
    sqlite3_vfs* vfs = nullptr;
    EXPECT_EQ(sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs), SQLITE_OK);
    return vfs != nullptr ? std::string(vfs->zName) : std::string();
  };
  ASSERT_NE(walCoalescingVfsName(), nullptr);
  auto full = openWalWriter(dir_.file("full.db"), "FULL");
  ASSERT_TRUE(full.ok()) << full.status().toString();
  EXPECT_EQ(vfsOf(full->get()), walCoalescingVfsName());
  auto normal = openWalWriter(dir_.file("normal.db"), "NORMAL");
  ASSERT_TRUE(normal.ok()) << normal.status().toString();
  EXPECT_EQ(vfsOf(normal->get()), sqlite3_vfs_find(nullptr)->zName);
}

}  // namespace
}  // namespace allot::store::sqlite
