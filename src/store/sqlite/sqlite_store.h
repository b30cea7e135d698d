#pragma once
// SqliteStore: the Store on an embedded SQLite file, for a single allotd.
//
// Durability: WAL journal with synchronous=FULL, so COMMIT returns only after the WAL is fsynced;
// a batch's completion is reported after its COMMIT.
//
// Threads: one writer thread owns the write connection and every prepared write statement.
// submit() and commit() may be called from any thread; they only queue. The writer takes every
// queued batch at once, applies them in order inside one transaction (group commit), then runs
// each `done` in order on the writer thread. If the group fails, it is rolled back and each batch
// is retried in its own transaction, so a bad batch fails alone. loadAll() reads through a
// separate connection and may run alongside the writer; so does queryAudit, on the same one. `done`
// callbacks must not call commit() (it would wait on the thread running them); they may call
// submit().
//
// Destruction drains the queue (every queued batch is applied and its `done` run), then joins
// the writer. No submit may race with the destructor.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/sqlite/sqlite_handle.h"
#include "store/sqlite/sqlite_rows.h"
#include "store/store.h"

namespace allot::store {

class SqliteStore final : public Store {
 public:
  // Opens (creating if needed) the database at `path`, brings its schema up to date, and starts
  // the writer. The directory must exist. ":memory:" is not supported: the reader needs a file.
  static Result<std::unique_ptr<SqliteStore>> open(const std::string& path);
  ~SqliteStore() override;

  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  // Store
  Result<Contents> loadAll() override;
  Status commit(WriteBatch batch) override;
  Result<std::vector<model::AuditEntry>> queryAudit(const AuditQuery& q) override;
  void submit(WriteBatch batch, std::function<void(Status)> done) override;
  int schemaVersion() const override { return schemaVersion_; }

  // Write transactions committed so far. With group commit this grows more slowly than the
  // number of batches; tests and benchmarks read it to see grouping happen.
  uint64_t transactionsCommitted() const { return transactionsCommitted_.load(); }
  const std::string& path() const { return path_; }

 private:
  struct Pending {
    WriteBatch batch;
    std::function<void(Status)> done;
  };

  SqliteStore(std::string path, int schemaVersion, sqlite::DbHandle writeDb,
              sqlite::WriteStatements statements, sqlite::DbHandle readDb);

  void writerLoop();
  void applyGroup(std::vector<Pending>& group);
  Status applyInTransaction(const Pending* first, const Pending* last);
  // SQLite's WAL hook: notes how many frames the WAL holds after each commit.
  static int noteWalFrames(void* store, sqlite3* db, const char* name, int frames);
  // Copies the WAL back into the database once it holds kCheckpointFrames: what SQLite's
  // automatic checkpoint does, but after a group's callbacks rather than inside its COMMIT, so
  // the group whose commit crossed the mark is answered first (docs/benchmarks.md, section 1).
  void checkpointIfDue();

  const std::string path_;
  const int schemaVersion_;

  // Writer thread only (handed over before the thread starts). Statements are declared after the
  // connection so they are finalized before it closes.
  sqlite::DbHandle writeDb_;
  sqlite::WriteStatements statements_;

  std::mutex readMu_;
  sqlite::DbHandle readDb_;  // GUARDED_BY(readMu_)

  std::mutex mu_;
  std::condition_variable wake_;  // signalled when queue_ gains work or stopping_ is set
  std::vector<Pending> queue_;    // GUARDED_BY(mu_)
  bool stopping_ = false;         // GUARDED_BY(mu_)

  std::atomic<uint64_t> transactionsCommitted_{0};
  int walFrames_ = 0;  // writer thread only: frames in the WAL after the last commit

  // Last member: started by the constructor once everything above is built (and the WAL hook
  // installed), and joined first in the destructor.
  std::thread writer_;
};

}  // namespace allot::store
