#pragma once
// Pieces of schema SQL that several migration steps write alike, spelled out once. What they
// produce is byte for byte what the steps have always run: SQLite keeps each CREATE's text in
// sqlite_schema, so a changed space would show in every database made afterwards.

#include <string>
#include <string_view>

namespace allot::store {

// Triggers that refuse every UPDATE and DELETE on `table`, failing with `message`: the table
// is an append-only log.
inline std::string appendOnlyTriggers(std::string_view table, std::string_view message) {
  std::string out;
  for (std::string_view op : {"update", "delete"}) {
    const std::string upper = op == "update" ? "UPDATE" : "DELETE";
    out += "CREATE TRIGGER " + std::string(table) + "_no_" + std::string(op) + " BEFORE " + upper +
           " ON " + std::string(table) + "\n  BEGIN SELECT RAISE(ABORT, '" + std::string(message) +
           "'); END;\n";
  }
  return out;
}

// A WITHOUT ROWID table; `body` is its column and key lines, each ending in a newline.
inline std::string withoutRowidTable(std::string_view name, std::string_view body) {
  return "CREATE TABLE " + std::string(name) + " (\n" + std::string(body) + ") WITHOUT ROWID;\n";
}

}  // namespace allot::store
