#include "store/sqlite/sqlite_handle.h"

#include <sys/stat.h>

#include <algorithm>
#include <vector>

#include "store/sqlite/wal_coalescing_vfs.h"

namespace allot::store::sqlite {
namespace {

// How long a connection waits on another connection's lock before giving up with SQLITE_BUSY.
// Only another process (a backup tool, an operator's sqlite3 shell) can hold one for long.
constexpr int kBusyTimeoutMs = 5000;

}  // namespace

Status statusFromCode(int rc, std::string message) {
  switch (rc & 0xff) {
    case SQLITE_OK:
      return Status::Ok();
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_PROTOCOL:
    case SQLITE_NOLFS:
      return Status::Unavailable(std::move(message));
    default:
      return Status::Internal(std::move(message));
  }
}

Status lastError(sqlite3* db, int rc, const std::string& what) {
  const char* reason = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return statusFromCode(rc, what + ": " + reason);
}

Result<DbHandle> openConnection(const std::string& path, int flags, const char* vfs) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, vfs);
  DbHandle db(raw);  // closes it on every path, including a failed open
  if (rc != SQLITE_OK) {
    return statusFromCode(rc, raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc));
  }
  sqlite3_extended_result_codes(db.get(), 1);
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  return db;
}

Result<DbHandle> openWalWriter(const std::string& path, std::string_view synchronous) {
  // A commit's frames in one write where every commit syncs the WAL: the coalescing VFS is
  // correct only then (wal_coalescing_vfs.h).
  const bool everyCommitSyncs = synchronous == "FULL" || synchronous == "EXTRA";
  auto db = openConnection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           everyCommitSyncs ? walCoalescingVfsName() : nullptr);
  if (!db.ok()) return db.status();
  auto mode = pragmaText(db->get(), "journal_mode = WAL");
  if (!mode.ok()) return mode.status();
  if (*mode != "wal")
    return Status::Unavailable("cannot use WAL journal (SQLite chose '" + *mode + "')");
  Status st = exec(db->get(), "PRAGMA synchronous = " + std::string(synchronous));
  if (!st.ok()) return st;
  return db;
}

namespace {

Status zeroFillWal(sqlite3* db, int64_t frames) {
  auto pageSize = pragmaInt(db, "page_size");
  if (!pageSize.ok()) return pageSize.status();
  // The connection's own handle on the WAL (through its VFS), so that no second descriptor of
  // ours could drop its locks.
  sqlite3_file* wal = nullptr;
  int rc = sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal);
  if (rc != SQLITE_OK) return lastError(db, rc, "cannot find the WAL file");
  if (wal == nullptr || wal->pMethods == nullptr) return Status::Ok();  // not open yet
  constexpr int64_t kWalHeaderBytes = 32;
  constexpr int64_t kFrameHeaderBytes = 24;
  const int64_t want = kWalHeaderBytes + frames * (kFrameHeaderBytes + *pageSize);
  sqlite3_int64 size = 0;
  rc = wal->pMethods->xFileSize(wal, &size);
  if (rc != SQLITE_OK) return statusFromCode(rc, "cannot read the WAL's size");
  if (size >= want) return Status::Ok();
  // The pointer is the rollback journal's when no WAL is open: write only to what is the -wal
  // file's size on disk too.
  struct stat walStat {};
  const char* walPath = sqlite3_filename_wal(sqlite3_db_filename(db, "main"));
  if (walPath == nullptr || ::stat(walPath, &walStat) != 0 || walStat.st_size != size)
    return Status::Ok();
  // 64 KiB a write: SQLite's unix VFS writes at most 128 KiB - 1 in one call (seekAndWriteFd).
  const std::vector<char> zeros(64 * 1024, 0);
  for (int64_t at = size; at < want;) {
    const int n =
        static_cast<int>(std::min<int64_t>(static_cast<int64_t>(zeros.size()), want - at));
    rc = wal->pMethods->xWrite(wal, zeros.data(), n, at);
    if (rc != SQLITE_OK)
      return statusFromCode(rc, std::string("cannot extend the WAL: ") + sqlite3_errstr(rc));
    at += n;
  }
  rc = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL);
  if (rc != SQLITE_OK)
    return statusFromCode(rc, std::string("cannot sync the WAL: ") + sqlite3_errstr(rc));
  return Status::Ok();
}

}  // namespace

Status presizeWal(sqlite3* db, int64_t frames) {
  // Inside a write transaction, which holds the WAL's write lock: no other connection (an
  // operator's sqlite3 shell) appends frames where the zeros go, or restarts the WAL, meanwhile.
  ALLOT_RETURN_IF_ERROR(exec(db, "BEGIN IMMEDIATE"));
  Status filled = zeroFillWal(db, frames);
  Status ended = exec(db, "COMMIT");  // of nothing: the transaction changed no page
  return filled.ok() ? ended : filled;
}

Status exec(sqlite3* db, std::string_view sql) {
  std::string owned(sql);  // sqlite3_exec wants a terminated string
  char* err = nullptr;
  int rc = sqlite3_exec(db, owned.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string message = err != nullptr ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  return statusFromCode(rc, std::move(message));
}

Result<StmtHandle> prepare(sqlite3* db, std::string_view sql, bool persistent) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                              persistent ? SQLITE_PREPARE_PERSISTENT : 0, &raw, nullptr);
  StmtHandle stmt(raw);
  if (rc != SQLITE_OK) return lastError(db, rc, "failed to prepare statement");
  return stmt;
}

Result<int64_t> pragmaInt(sqlite3* db, std::string_view pragma) {
  auto stmt = prepare(db, "PRAGMA " + std::string(pragma));
  if (!stmt.ok()) return stmt.status();
  int rc = sqlite3_step(stmt->get());
  if (rc != SQLITE_ROW) return lastError(db, rc, "failed to read PRAGMA " + std::string(pragma));
  return sqlite3_column_int64(stmt->get(), 0);
}

Result<std::string> pragmaText(sqlite3* db, std::string_view pragma) {
  auto stmt = prepare(db, "PRAGMA " + std::string(pragma));
  if (!stmt.ok()) return stmt.status();
  int rc = sqlite3_step(stmt->get());
  if (rc != SQLITE_ROW) return lastError(db, rc, "failed to run PRAGMA " + std::string(pragma));
  return columnText(stmt->get(), 0);
}

Status Binder::run() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return Status::Ok();
  return statusFromCode(rc, sqlite3_errmsg(sqlite3_db_handle(stmt_)));
}

std::string columnText(sqlite3_stmt* stmt, int col) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, col));
  if (p == nullptr) return {};
  return std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt, col)));
}

}  // namespace allot::store::sqlite
