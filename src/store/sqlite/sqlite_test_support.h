#pragma once
// Test support for code that keeps a SQLite file: a scratch directory per test, and SQL run on
// the file directly, behind the store's back (a database as an older release left it, or a
// write the store itself would never make). For tests only.

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace allot::store::test {

// A fresh directory under the system's temporary directory, removed with all it holds when the
// test ends.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << tmpl;
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Runs `sql` on the database file at `path` through a connection of its own; SQLite's error
// message when it fails, nullopt when it succeeds.
inline std::optional<std::string> execOnFile(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << path << ": " << sqlite3_errmsg(db);
    sqlite3_close(db);
    return "cannot open " + path;
  }
  char* err = nullptr;
  std::optional<std::string> out;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK)
    out = err ? err : "unknown error";
  sqlite3_free(err);
  sqlite3_close(db);
  return out;
}

}  // namespace allot::store::test
