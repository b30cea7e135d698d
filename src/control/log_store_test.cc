#include "control/log_store.h"

#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>

namespace allot::control {
namespace {

class LogStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("allot-logs-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<LogStore> open(LogStoreOptions o) {
    auto s = std::make_unique<LogStore>(dir_.string(), o);
    EXPECT_TRUE(s->init().ok());
    return s;
  }
  static std::string all(LogStore& s, int64_t job) {
    auto r = s.read(job, 0, 1 << 30);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : "";
  }
  std::filesystem::path dir_;
};

// Numbered lines, so that what was kept can be told apart from what was dropped.
std::string lines(int from, int to) {
  std::string out;
  for (int i = from; i < to; ++i) out += "line " + std::to_string(i) + "\n";
  return out;
}

TEST_F(LogStoreTest, AnUncappedLogKeepsEverythingAndIgnoresResends) {
  auto s = open({0, 0});
  ASSERT_TRUE(s->append(1, 0, "hello ").ok());
  ASSERT_TRUE(s->append(1, 0, "hello ").ok());  // resent after a reconnect
  ASSERT_TRUE(s->append(1, 6, "world").ok());
  EXPECT_EQ(all(*s, 1), "hello world");
  EXPECT_EQ(s->received(1), 11);
  EXPECT_EQ(s->append(1, 20, "gap").code(), Code::kFailedPrecondition);
  EXPECT_EQ(s->append(1, -5, "neg").code(), Code::kInvalidArgument);
  EXPECT_EQ(all(*s, 1), "hello world");
}

TEST_F(LogStoreTest, ACappedLogKeepsItsHeadAndTailAndSaysWhatItDropped) {
  const int64_t cap = 8192;
  auto s = open({cap, 0});
  const std::string out = lines(0, 20'000);  // about 230 KB
  int64_t offset = 0;
  for (size_t at = 0; at < out.size(); at += 1000) {
    std::string chunk = out.substr(at, 1000);
    ASSERT_TRUE(s->append(7, offset, chunk).ok());
    offset += static_cast<int64_t>(chunk.size());
  }
  EXPECT_EQ(s->received(7), static_cast<int64_t>(out.size()));
  // While the job runs, readers see the head and a line that says the rest comes at the end.
  std::string running = all(*s, 7);
  EXPECT_EQ(running.rfind(out.substr(0, cap / 2), 0), 0u);
  EXPECT_NE(running.find("--max-log-bytes"), std::string::npos);
  EXPECT_LT(running.size(), static_cast<size_t>(cap));
  s->seal(7);
  std::string sealed = all(*s, 7);
  // Only ever grows: what a follower was shown is still there.
  EXPECT_EQ(sealed.rfind(running, 0), 0u);
  EXPECT_LT(sealed.size(), static_cast<size_t>(cap) + 1024);
  const std::string tail = out.substr(out.size() - cap / 2);
  EXPECT_EQ(sealed.substr(sealed.size() - tail.size()), tail);
  const int64_t dropped = static_cast<int64_t>(out.size()) - cap;
  EXPECT_NE(sealed.find(std::to_string(dropped) + " bytes of output were dropped"),
            std::string::npos);
  // A sealed log takes nothing more.
  EXPECT_EQ(s->append(7, offset, "late").code(), Code::kFailedPrecondition);
}

// Past the head an agent skips what the cap drops (model::LogKeep): the gap counts as dropped,
// and the tail shows only what came after the last gap, though the ring is not full again.
TEST_F(LogStoreTest, PastTheHeadAGapIsOutputTheAgentSkippedAndCountsAsDropped) {
  const int64_t cap = 8192;
  auto s = open({cap, 0});
  const std::string head = lines(0, 1000);  // past the head: capped
  ASSERT_TRUE(s->append(3, 0, head).ok());
  const int64_t skippedTo = static_cast<int64_t>(head.size()) + 1'000'000'000;
  const std::string last = "the last words\n";
  ASSERT_TRUE(s->append(3, skippedTo, last).ok());
  EXPECT_EQ(s->received(3), skippedTo + static_cast<int64_t>(last.size()));
  s->seal(3);
  const std::string sealed = all(*s, 3);
  EXPECT_EQ(sealed.rfind(head.substr(0, cap / 2), 0), 0u);
  const std::string said = "; the last " + std::to_string(last.size()) + " bytes follow]\n";
  EXPECT_EQ(sealed.substr(sealed.size() - said.size() - last.size()), said + last) << sealed;
  const int64_t dropped = skippedTo - cap / 2;
  EXPECT_NE(sealed.find(std::to_string(dropped) + " bytes of output were dropped"),
            std::string::npos);
  // Before the head is full, a gap is still refused.
  ASSERT_TRUE(s->append(4, 0, "short").ok());
  EXPECT_EQ(s->append(4, 100, "gap").code(), Code::kFailedPrecondition);
}

TEST_F(LogStoreTest, ACappedLogSurvivesARestartAndIsSealedThen) {
  const int64_t cap = 4096;
  {
    auto s = open({cap, 0});
    ASSERT_TRUE(s->append(3, 0, lines(0, 1000)).ok());
    ASSERT_TRUE(s->append(3, 0, lines(0, 1000), 1).ok());  // a gang's rank 1
  }
  auto s = open({cap, 0});
  EXPECT_EQ(s->received(3), static_cast<int64_t>(lines(0, 1000).size()));
  EXPECT_EQ(s->unsealedAtStart().size(), 2u);
  // The agent resends from `received` after a restart: nothing is written twice.
  ASSERT_TRUE(s->append(3, s->received(3), lines(1000, 1001)).ok());
  s->seal(3);
  std::string sealed = all(*s, 3);
  EXPECT_EQ(sealed.substr(sealed.size() - 10), "line 1000\n");
  EXPECT_EQ(sealed.find("line 999\nline 999\n"), std::string::npos);
  auto again = open({cap, 0});
  EXPECT_EQ(again->unsealedAtStart().size(), 1u);  // rank 1 only
}

TEST_F(LogStoreTest, ARingKeepsItsSizeWhenTheCapChanges) {
  {
    auto s = open({4096, 0});
    ASSERT_TRUE(s->append(9, 0, lines(0, 1000)).ok());
  }
  // allotd restarted with no cap, then with another: the ring made at 4096 still reads right.
  for (int64_t cap : {int64_t{0}, int64_t{1} << 20}) {
    auto s = open({cap, 0});
    EXPECT_EQ(s->received(9), static_cast<int64_t>(lines(0, 1000).size()));
  }
  auto s = open({0, 0});
  ASSERT_TRUE(s->append(9, s->received(9), lines(1000, 1001)).ok());
  s->seal(9);
  std::string sealed = all(*s, 9);
  EXPECT_EQ(sealed.substr(sealed.size() - 19), "line 999\nline 1000\n");
}

TEST_F(LogStoreTest, ANearlyFullDiskDropsOutputAndSaysSoOnce) {
  std::filesystem::create_directories(dir_);
  struct statvfs vfs {};
  ASSERT_EQ(::statvfs(dir_.c_str(), &vfs), 0);
  const int64_t free = static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
  // A reserve above what the disk has free: as if the disk were nearly full.
  auto s = open({0, free + (int64_t{1} << 30)});
  ASSERT_TRUE(s->append(5, 0, "first\n").ok());
  ASSERT_TRUE(s->append(5, 6, "second\n").ok());
  std::string text = all(*s, 5);
  EXPECT_EQ(text.find("first"), std::string::npos);
  EXPECT_NE(text.find("reserve"), std::string::npos);
  EXPECT_EQ(text.find("reserve"), text.rfind("reserve"));
  // The offsets stay in step with the agent's, so nothing is refused as a gap.
  EXPECT_EQ(s->received(5), 13);
}

}  // namespace
}  // namespace allot::control
