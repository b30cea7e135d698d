#pragma once
// Migration: one step of a store's schema history. A backend holds its steps as an ordered list,
// versions 1, 2, 3, ... with no gaps; a database at version N has run steps 1..N. Steps are
// never edited once released: a change to the schema is a new step.

#include <string_view>

namespace allot::store {

struct Migration {
  int version;            // the schema version the database is at after this step
  std::string_view name;  // short description, shown in errors
  std::string_view sql;   // one or more statements in the backend's dialect
};

}  // namespace allot::store
