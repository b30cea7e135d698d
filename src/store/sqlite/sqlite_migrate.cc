#include "store/sqlite/sqlite_migrate.h"

#include <string>

#include "store/sqlite/sqlite_handle.h"

namespace allot::store::sqlite {
namespace {

Status checkNumbering(std::span<const Migration> steps) {
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].version != static_cast<int>(i) + 1) {
      return Status::Internal("schema migrations are misnumbered: step " + std::to_string(i) +
                              " has version " + std::to_string(steps[i].version));
    }
  }
  return Status::Ok();
}

// Runs one step inside BEGIN IMMEDIATE. The version is read again under the write lock so that
// two processes opening the same fresh file do not both run a step.
Status applyStep(sqlite3* db, const Migration& step) {
  ALLOT_RETURN_IF_ERROR(exec(db, "BEGIN IMMEDIATE"));
  Status st = [&]() -> Status {
    auto current = pragmaInt(db, "user_version");
    if (!current.ok()) return current.status();
    if (*current >= step.version) return Status::Ok();
    ALLOT_RETURN_IF_ERROR(exec(db, step.sql));
    ALLOT_RETURN_IF_ERROR(exec(db, "PRAGMA user_version = " + std::to_string(step.version)));
    return exec(db, "COMMIT");
  }();
  if (sqlite3_get_autocommit(db) == 0) {
    // Still inside the transaction: either the step was already applied by someone else (nothing
    // to keep) or it failed (nothing may be kept).
    Status rollback = exec(db, "ROLLBACK");
    (void)rollback;  // the step's own error, if any, is the one worth reporting
  }
  return st;
}

}  // namespace

Result<int> migrate(sqlite3* db, std::span<const Migration> steps) {
  ALLOT_RETURN_IF_ERROR(checkNumbering(steps));
  const int latest = steps.empty() ? 0 : steps.back().version;
  auto current = pragmaInt(db, "user_version");
  if (!current.ok()) return current.status().withContext("failed to read schema version");
  if (*current > latest) {
    return Status::FailedPrecondition("database schema version " + std::to_string(*current) +
                                      " is newer than this build supports (" +
                                      std::to_string(latest) +
                                      "); run a newer allotd or restore a backup");
  }
  for (const Migration& step : steps) {
    if (step.version <= *current) continue;
    Status st = applyStep(db, step);
    if (!st.ok()) {
      return st.withContext("failed to apply schema migration " + std::to_string(step.version) +
                            " (" + std::string(step.name) + ")");
    }
  }
  auto final = pragmaInt(db, "user_version");
  if (!final.ok()) return final.status().withContext("failed to read schema version");
  return static_cast<int>(*final);
}

}  // namespace allot::store::sqlite
