#pragma once
// The SQLite schema history, applied by sqlite/sqlite_migrate.h. A PostgreSQL backend would keep
// its own list next to this one, in its own dialect.

#include <span>

#include "store/migrations/migration.h"

namespace allot::store {

std::span<const Migration> sqliteMigrations();

}  // namespace allot::store
