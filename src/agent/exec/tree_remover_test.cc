#include "agent/exec/tree_remover.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "agent/test_dirs.h"

namespace allot::agent {
namespace {

namespace fs = std::filesystem;

class TreeRemoverTest : public testdirs::TempDirTest {
 protected:
  TreeRemoverTest() : TempDirTest("tree-remover") {}

  // n files in dir, and n more in a subdirectory of it.
  static void fill(const fs::path& dir, int n) {
    fs::create_directories(dir / "sub");
    for (int i = 0; i < n; ++i) {
      std::ofstream(dir / std::to_string(i)) << "x";
      std::ofstream(dir / "sub" / std::to_string(i)) << "x";
    }
  }

  static size_t entriesIn(const fs::path& dir) {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
    return n;
  }
};

TEST_F(TreeRemoverTest, ATreeWithinTheBudgetGoesOnTheCallersThread) {
  const fs::path parent = fs::path(dir_) / "jobs";
  fill(parent / "7", 10);
  TreeRemover remover(100);
  const TreeRemover::Removal r = remover.remove((parent / "7").string());
  EXPECT_EQ(r.error, 0);
  EXPECT_FALSE(r.setAside);
  EXPECT_EQ(entriesIn(parent), 0u);
}

// A job can leave millions of files: the caller removes a budget's worth, and the path is free
// at once; the rest goes in the background, through no symlink the job left.
TEST_F(TreeRemoverTest, WhatTheBudgetDoesNotCoverIsSetAsideAndRemovedInTheBackground) {
  const fs::path parent = fs::path(dir_) / "jobs";
  const fs::path outside = fs::path(dir_) / "outside";
  fill(outside, 3);
  fill(parent / "7", 200);
  fs::create_directory_symlink(outside, parent / "7" / "link");
  fs::create_directory_symlink(outside, parent / "7" / "sub" / "link");
  TreeRemover remover(10);
  const TreeRemover::Removal r = remover.remove((parent / "7").string());
  EXPECT_EQ(r.error, 0);
  EXPECT_TRUE(r.setAside);
  EXPECT_FALSE(fs::exists(fs::symlink_status(parent / "7")));
  fs::create_directory(parent / "7");  // the next job of this id
  remover.waitUntilIdle();
  EXPECT_EQ(entriesIn(parent), 1u);
  EXPECT_EQ(entriesIn(parent / "7"), 0u);
  EXPECT_EQ(entriesIn(outside), 4u) << "a link the job left was followed";
}

// An agent that stopped while it removed a tree left it under its aside name; the next one's
// sweep removes it, and nothing else in that directory.
TEST_F(TreeRemoverTest, ASweepFinishesWhatAnEarlierAgentSetAside) {
  const fs::path parent = fs::path(dir_) / "jobs";
  fill(parent / (std::string(kAsidePrefix) + "1234"), 50);
  fill(parent / "8", 2);
  std::ofstream(parent / ".allot-other") << "kept";
  TreeRemover remover(10);
  remover.sweep(parent.string());
  remover.waitUntilIdle();
  EXPECT_FALSE(fs::exists(parent / (std::string(kAsidePrefix) + "1234")));
  EXPECT_TRUE(fs::exists(parent / "8" / "sub" / "1"));
  EXPECT_TRUE(fs::exists(parent / ".allot-other"));
}

// Stopping does not wait for a huge tree: the remover stops between slices, and what is left is
// still under its aside name for the next sweep.
TEST_F(TreeRemoverTest, ARemoverStoppedMidwayLeavesTheRestForTheNextSweep) {
  const fs::path parent = fs::path(dir_) / "jobs";
  fill(parent / "7", 2000);
  {
    TreeRemover remover(1);
    ASSERT_TRUE(remover.remove((parent / "7").string()).setAside);
  }
  TreeRemover next(1000);
  next.sweep(parent.string());
  next.waitUntilIdle();
  EXPECT_EQ(entriesIn(parent), 0u);
}

}  // namespace
}  // namespace allot::agent
