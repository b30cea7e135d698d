#pragma once
// The schema of telemetry.db, as migration steps (see store/migrations/migration.h).

#include <span>

#include "store/migrations/migration.h"

namespace allot::telemetry {

std::span<const store::Migration> telemetryMigrations();

}  // namespace allot::telemetry
