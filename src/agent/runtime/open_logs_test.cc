#include "agent/runtime/open_logs.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace allot::agent {
namespace {

namespace fs = std::filesystem;

class OpenLogsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/allot-open-logs-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void append(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::app) << text;
  }
  std::string dir_;
};

TEST_F(OpenLogsTest, ReadsWhatWasAddedSinceTheOffsetInChunksAndNothingAtTheEnd) {
  const std::string log = dir_ + "/output.log";
  OpenLogs logs;
  EXPECT_EQ(logs.fd(7, log), -1);  // not there yet: tried again later
  EXPECT_EQ(logs.size(), 0u);
  append(log, "hello ");
  const int fd = logs.fd(7, log);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(logs.fd(7, log), fd);  // held, not opened again
  EXPECT_EQ(readAt(fd, 0, 4), "hell");
  EXPECT_EQ(readAt(fd, 4, 100), "o ");
  EXPECT_EQ(readAt(fd, 6, 100), "");
  append(log, "world\n");
  EXPECT_EQ(readAt(fd, 6, 100), "world\n");
  EXPECT_EQ(readAt(fd, 50, 100), "");
  EXPECT_EQ(sizeOfFd(fd), 12);
  EXPECT_EQ(readAt(-1, 0, 100), "");
  EXPECT_EQ(sizeOfFd(-1), -1);
}

// A job run again (a requeue) writes a new file at the same path: after forget() that file is
// read, not the old run's.
TEST_F(OpenLogsTest, AfterForgetANewFileAtThePathIsRead) {
  const std::string log = dir_ + "/output.log";
  append(log, "first run\n");
  OpenLogs logs;
  ASSERT_EQ(readAt(logs.fd(7, log), 0, 100), "first run\n");
  fs::remove(log);
  append(log, "second\n");
  EXPECT_EQ(readAt(logs.fd(7, log), 0, 100), "first run\n");  // still the old file
  logs.forget(7);
  EXPECT_EQ(readAt(logs.fd(7, log), 0, 100), "second\n");
  logs.forget(7);
  logs.forget(8);  // not held: nothing
  EXPECT_EQ(logs.size(), 0u);
}

TEST_F(OpenLogsTest, ALinkInPlaceOfTheLogIsNotFollowed) {
  std::ofstream(dir_ + "/secret") << "not the job's\n";
  fs::create_symlink(dir_ + "/secret", dir_ + "/output.log");
  OpenLogs logs;
  EXPECT_EQ(logs.fd(7, dir_ + "/output.log"), -1);
}

}  // namespace
}  // namespace allot::agent
