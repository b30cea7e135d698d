#pragma once
// Brings a SQLite database up to the newest schema in a list of migrations. The version lives in
// PRAGMA user_version, which SQLite writes inside the same transaction as the step, so a step
// either fully happens (schema and version) or not at all.

#include <sqlite3.h>

#include <span>

#include "common/status.h"
#include "store/migrations/migration.h"

namespace allot::store::sqlite {

// Applies every step newer than the database's version, each in its own transaction, and returns
// the version the database ends at. An up-to-date database is left untouched. A database whose
// version is newer than the last step is refused (kFailedPrecondition): this build would not
// understand its rows. `steps` must be numbered 1, 2, 3, ... in order.
Result<int> migrate(sqlite3* db, std::span<const Migration> steps);

}  // namespace allot::store::sqlite
