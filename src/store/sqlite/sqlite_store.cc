#include "store/sqlite/sqlite_store.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <future>
#include <system_error>

#include "store/migrations/sqlite_migrations.h"
#include "store/sqlite/sqlite_migrate.h"

namespace allot::store {

using sqlite::DbHandle;

namespace {
// SQLite's own default (wal_autocheckpoint): about 4 MiB of WAL, which stays that size, reused
// (zero-filled to 1,250 frames, 5 MiB, when the store opens: presizeWal below).
constexpr int kCheckpointFrames = 1000;
}  // namespace

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const std::string& path) {
  const std::string context = "failed to open store " + path;
  // WAL lets loadAll read while the writer writes; FULL makes every COMMIT fsync the WAL, which
  // is what lets a completion mean "on disk".
  auto writeDb = sqlite::openWalWriter(path, "FULL");
  if (!writeDb.ok()) return writeDb.status().withContext(context);
  sqlite3* db = writeDb->get();

  auto version = sqlite::migrate(db, sqliteMigrations());
  if (!version.ok()) return version.status().withContext(context);

  // Room for the frames between two checkpoints, and a group commit's worth past the mark.
  // Only a speed-up: without it the WAL grows as it always has.
  Status presized = sqlite::presizeWal(db, kCheckpointFrames + kCheckpointFrames / 4);
  if (!presized.ok()) spdlog::warn("store {}: {}", path, presized.toString());

  auto statements = sqlite::WriteStatements::prepareAll(db);
  if (!statements.ok()) return statements.status().withContext(context);

  auto readDb = sqlite::openConnection(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
  if (!readDb.ok()) return readDb.status().withContext(context + " for reading");

  try {
    return std::unique_ptr<SqliteStore>(new SqliteStore(path, *version, std::move(writeDb).value(),
                                                        std::move(statements).value(),
                                                        std::move(readDb).value()));
  } catch (const std::system_error& e) {  // the writer thread could not start
    return Status::Unavailable(context + ": cannot start writer thread: " + e.what());
  }
}

SqliteStore::SqliteStore(std::string path, int schemaVersion, DbHandle writeDb,
                         sqlite::WriteStatements statements, DbHandle readDb)
    : path_(std::move(path)),
      schemaVersion_(schemaVersion),
      writeDb_(std::move(writeDb)),
      statements_(std::move(statements)),
      readDb_(std::move(readDb)) {
  // From here the writer checkpoints by itself (checkpointIfDue), not inside each COMMIT: the
  // hook replaces SQLite's automatic checkpoint.
  sqlite3_wal_hook(writeDb_.get(), &SqliteStore::noteWalFrames, this);
  writer_ = std::thread([this] { writerLoop(); });
}

SqliteStore::~SqliteStore() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  writer_.join();
}

Result<Contents> SqliteStore::loadAll() {
  std::lock_guard lock(readMu_);
  sqlite3* db = readDb_.get();
  // One read transaction, so every table comes from the same snapshot.
  Status st = sqlite::exec(db, "BEGIN");
  if (!st.ok()) return st.withContext("failed to read store " + path_);
  auto contents = sqlite::loadContents(db);
  st = sqlite::exec(db, "COMMIT");  // ends the read; it changed nothing
  if (!contents.ok()) return contents.status().withContext("failed to read store " + path_);
  if (!st.ok()) return st.withContext("failed to read store " + path_);
  return contents;
}

Result<std::vector<model::AuditEntry>> SqliteStore::queryAudit(const AuditQuery& q) {
  std::lock_guard lock(readMu_);
  auto entries = sqlite::queryAudit(readDb_.get(), q);
  if (!entries.ok()) return entries.status().withContext("store " + path_);
  return entries;
}

Status SqliteStore::commit(WriteBatch batch) {
  if (std::this_thread::get_id() == writer_.get_id()) {
    return Status::Internal(
        "Store::commit called from the store's writer thread; it would wait "
        "on itself (use submit inside a done callback)");
  }
  // Shared with the callback: the writer may still be inside set_value when get() returns here.
  auto result = std::make_shared<std::promise<Status>>();
  std::future<Status> done = result->get_future();
  submit(std::move(batch), [result](Status s) { result->set_value(std::move(s)); });
  return done.get();
}

void SqliteStore::submit(WriteBatch batch, std::function<void(Status)> done) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(Pending{std::move(batch), std::move(done)});
  }
  wake_.notify_one();
}

void SqliteStore::writerLoop() {
  std::vector<Pending> group;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to drain
      group.swap(queue_);
    }
    applyGroup(group);
    group.clear();
  }
}

void SqliteStore::applyGroup(std::vector<Pending>& group) {
  const Pending* first = group.data();
  const Pending* last = first + group.size();
  std::vector<Status> results(group.size());
  Status all = applyInTransaction(first, last);
  if (!all.ok()) {
    if (group.size() == 1) {
      results[0] = all;
    } else {
      // Find the bad batch by giving each its own transaction: those before it commit, in order;
      // those after it do not, for they may build on it (a placement on the submission of its
      // job), and the store must never hold a state that was not, in order, the caller's.
      size_t i = 0;
      for (; i < group.size(); ++i) {
        results[i] = applyInTransaction(first + i, first + i + 1);
        if (!results[i].ok()) break;
      }
      for (++i; i < group.size(); ++i) {
        results[i] = Status::Unavailable("not applied: a write submitted before it failed");
      }
    }
  }
  for (size_t i = 0; i < group.size(); ++i) {
    if (!group[i].done) continue;
    try {
      group[i].done(std::move(results[i]));
    } catch (const std::exception& e) {
      // The batch's fate is settled; a throwing callback must not take the writer down with it.
      spdlog::error("store done callback threw: {}", e.what());
    } catch (...) {
      spdlog::error("store done callback threw a non-standard exception");
    }
  }
  checkpointIfDue();
}

int SqliteStore::noteWalFrames(void* store, sqlite3* /*db*/, const char* /*name*/, int frames) {
  static_cast<SqliteStore*>(store)->walFrames_ = frames;
  return SQLITE_OK;
}

void SqliteStore::checkpointIfDue() {
  if (walFrames_ < kCheckpointFrames) return;
  // PASSIVE, as the automatic one: copies what no reader still needs, and never waits. When it
  // copied everything, the next commit writes the WAL from its start again; when a reader held
  // some frames back, the next group tries again.
  const int rc = sqlite3_wal_checkpoint_v2(writeDb_.get(), nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                           nullptr, nullptr);
  if (rc != SQLITE_OK && rc != SQLITE_BUSY)
    spdlog::warn("store {}: checkpoint of the WAL failed: {}", path_, sqlite3_errstr(rc));
  walFrames_ = 0;  // counted again from the next commit
}

Status SqliteStore::applyInTransaction(const Pending* first, const Pending* last) {
  bool anyOps = false;
  for (const Pending* p = first; p != last && !anyOps; ++p) anyOps = !p->batch.empty();
  if (!anyOps) return Status::Ok();

  Status st = statements_.begin();
  if (!st.ok()) return st.withContext("failed to begin transaction on store " + path_);
  for (const Pending* p = first; p != last && st.ok(); ++p) {
    for (const WriteOp& op : p->batch.ops) {
      st = statements_.apply(op);
      if (!st.ok()) break;
    }
  }
  if (st.ok()) {
    st = statements_.commit();
    if (!st.ok()) st = st.withContext("failed to commit to store " + path_);
  }
  if (!st.ok()) {
    statements_.rollback();
    return st;
  }
  transactionsCommitted_.fetch_add(1);
  return Status::Ok();
}

}  // namespace allot::store
