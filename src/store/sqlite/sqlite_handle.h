#pragma once
// Thin RAII over the SQLite C API, and the one place where SQLite result codes become Status.
// Nothing here is thread-safe: a connection and its statements belong to one thread at a time.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace allot::store::sqlite {

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbHandle = std::unique_ptr<sqlite3, DbCloser>;

struct StmtFinalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using StmtHandle = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

// A Status for result code `rc`: `message` as given. Disk and locking trouble is kUnavailable
// (the disk is not there right now); anything else is kInternal.
Status statusFromCode(int rc, std::string message);

// The connection's last error as a Status: "<what>: <sqlite message>".
Status lastError(sqlite3* db, int rc, const std::string& what);

// Opens a connection with extended result codes and a busy timeout. `flags` are
// SQLITE_OPEN_* flags; `vfs` a registered VFS's name (nullptr: SQLite's default). The error names
// only SQLite's reason; callers add the path.
Result<DbHandle> openConnection(const std::string& path, int flags, const char* vfs = nullptr);

// Opens (creating if needed) a database for writing in WAL mode, so that a second, read-only
// connection can read while this one writes, with `PRAGMA synchronous = <synchronous>` ("FULL":
// every COMMIT fsyncs the WAL; "NORMAL": a COMMIT survives the process, not a power cut). With
// "FULL" or "EXTRA", a commit's WAL frames go to the file in one write (wal_coalescing_vfs.h).
Result<DbHandle> openWalWriter(const std::string& path, std::string_view synchronous);

// Zero-fills db's WAL file past its end until it holds `frames` frames, and syncs it, as
// PostgreSQL zero-fills each new WAL segment (wal_init_zero): SQLite then overwrites the file in
// place, and each COMMIT's fdatasync writes only data. Appending to the file instead would change
// its size and extents, which a journaling file system commits to its journal at every fdatasync
// until the WAL has grown to its working size, after every start. Frames past the last valid one
// are never read as frames (each carries its WAL's salts and a running checksum), so zeros after
// the end change nothing SQLite reads, and nothing is written before the end. A no-op when the WAL
// is not open yet or is already that long. Runs in a transaction of its own (BEGIN IMMEDIATE).
Status presizeWal(sqlite3* db, int64_t frames);

// Runs one or more statements that return no rows we need.
Status exec(sqlite3* db, std::string_view sql);

// Prepares one statement; `persistent` hints SQLite that it will be reused many times.
Result<StmtHandle> prepare(sqlite3* db, std::string_view sql, bool persistent = false);

// Reads a single-integer PRAGMA such as user_version.
Result<int64_t> pragmaInt(sqlite3* db, std::string_view pragma);
// Runs a PRAGMA and returns the first column of its first row as text ("wal").
Result<std::string> pragmaText(sqlite3* db, std::string_view pragma);

// Binds parameters of a cached statement and runs it; resets the statement when it goes out of
// scope so the next use starts clean. Text is bound without copying: the bound strings must
// outlive the Binder, which they do when both are locals of the same scope.
class Binder {
 public:
  explicit Binder(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~Binder() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  Binder(const Binder&) = delete;
  Binder& operator=(const Binder&) = delete;

  Binder& text(std::string_view v) {
    sqlite3_bind_text(stmt_, ++next_, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    return *this;
  }
  Binder& integer(int64_t v) {
    sqlite3_bind_int64(stmt_, ++next_, v);
    return *this;
  }
  Binder& real(double v) {
    sqlite3_bind_double(stmt_, ++next_, v);
    return *this;
  }
  Binder& null() {
    sqlite3_bind_null(stmt_, ++next_);
    return *this;
  }
  // Steps a statement that returns no rows. The error is SQLite's reason alone; callers say
  // which row it was about.
  Status run();

 private:
  sqlite3_stmt* stmt_;
  int next_ = 0;
};

// Column readers for a row in hand.
std::string columnText(sqlite3_stmt* stmt, int col);
inline int64_t columnInt(sqlite3_stmt* stmt, int col) { return sqlite3_column_int64(stmt, col); }

}  // namespace allot::store::sqlite
