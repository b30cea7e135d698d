#pragma once
// Directories and files for the agent's tests: a fixture with a fresh temporary directory, a
// directory named after the running test, and a whole file read back. Test-only.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace allot::agent::testdirs {

// A fixture whose tests each get dir_, a fresh /tmp/allot-<what>-XXXXXX, removed after the test.
class TempDirTest : public ::testing::Test {
 protected:
  explicit TempDirTest(std::string what) : what_(std::move(what)) {}
  void SetUp() override {
    std::string tmpl = "/tmp/allot-" + what_ + "-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string dir_;

 private:
  std::string what_;
};

// <temp>/allot-<what>-<pid>-<test name>, emptied: a leftover of a crashed run names its test.
inline std::filesystem::path perTestDir(const std::string& what) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("allot-" + what + "-" + std::to_string(::getpid()) + "-" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  return dir;
}

// The whole file; "" when it cannot be read.
inline std::string fileText(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace allot::agent::testdirs
