#include "agent/exec/remove_tree.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/test_dirs.h"

namespace allot::agent {
namespace {

namespace fs = std::filesystem;

class RemoveTreeTest : public testdirs::TempDirTest {
 protected:
  RemoveTreeTest() : TempDirTest("remove-tree") {}

  static void touch(const fs::path& p) { std::ofstream(p) << "x"; }

  // `levels` directories, each named d, one inside the other, under dir; a file at the bottom.
  static void makeDeep(const std::string& dir, size_t levels) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(fd, 0);
    for (size_t i = 0; i < levels; ++i) {
      ASSERT_EQ(::mkdirat(fd, "d", 0755), 0);
      const int next = ::openat(fd, "d", O_RDONLY | O_DIRECTORY);
      ::close(fd);
      ASSERT_GE(next, 0);
      fd = next;
    }
    const int file = ::openat(fd, "bottom", O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(file, 0);
    ::close(file);
    ::close(fd);
  }
};

TEST_F(RemoveTreeTest, RemovesFilesDirectoriesLinksAndFifos) {
  const fs::path tree = fs::path(dir_) / "tree";
  fs::create_directories(tree / "a" / "b" / "c");
  fs::create_directories(tree / "empty");
  touch(tree / "top");
  touch(tree / "a" / "b" / "c" / "deep");
  ASSERT_EQ(::mkfifo((tree / "a" / "fifo").c_str(), 0600), 0);
  fs::create_symlink("top", tree / "a" / "dangling-or-not");
  fs::create_hard_link(tree / "top", tree / "a" / "b" / "hard");

  EXPECT_EQ(removeTree(tree.string()), 0);
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
  EXPECT_EQ(removeTree(tree.string()), 0) << "nothing there is done, not an error";

  touch(tree);  // a plain file in the directory's place is unlinked
  EXPECT_EQ(removeTree(tree.string()), 0);
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
}

// What a job leaves in its scratch directory may point anywhere: the links go, their targets stay.
TEST_F(RemoveTreeTest, NeverFollowsASymlink) {
  const fs::path outside = fs::path(dir_) / "outside";
  fs::create_directories(outside / "inner");
  touch(outside / "precious");
  touch(outside / "inner" / "precious");
  const fs::path tree = fs::path(dir_) / "tree";
  fs::create_directories(tree / "sub");
  fs::create_directory_symlink(outside, tree / "to-dir");
  fs::create_directory_symlink(outside / "inner", tree / "sub" / "to-inner");
  fs::create_symlink(outside / "precious", tree / "to-file");

  EXPECT_EQ(removeTree(tree.string()), 0);
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
  EXPECT_TRUE(fs::exists(outside / "precious"));
  EXPECT_TRUE(fs::exists(outside / "inner" / "precious"));

  // The path itself a symlink to a directory: the link is removed, not what it points to.
  const fs::path link = fs::path(dir_) / "link";
  fs::create_directory_symlink(outside, link);
  EXPECT_EQ(removeTree(link.string()), 0);
  EXPECT_FALSE(fs::exists(fs::symlink_status(link)));
  EXPECT_TRUE(fs::exists(outside / "inner" / "precious"));
}

// Entries read in one batch, with subdirectories among them: reading a directory on where it left
// off, after each subdirectory, must miss none.
TEST_F(RemoveTreeTest, RemovesADirectoryOfManyEntriesWithSubdirectoriesAmongThem) {
  const fs::path tree = fs::path(dir_) / "tree";
  fs::create_directories(tree);
  for (int i = 0; i < 2000; ++i) {
    const fs::path p = tree / ("entry-with-a-longish-name-" + std::to_string(i));
    if (i % 10 == 0) {
      fs::create_directory(p);
      touch(p / "inside");
    } else {
      touch(p);
    }
  }
  EXPECT_EQ(removeTree(tree.string()), 0);
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
}

// A job can make a tree far deeper than the agent may hold directories open. Under a descriptor
// limit that leaves room for kRemoveTreeMaxDepth and a few more, the whole tree still goes.
TEST_F(RemoveTreeTest, RemovesATreeDeeperThanTheDescriptorsItMayHold) {
  const fs::path tree = fs::path(dir_) / "tree";
  fs::create_directories(tree);
  makeDeep(tree.string(), 4 * kRemoveTreeMaxDepth + 7);

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // New descriptors take the lowest free numbers, below the limit: room for a few more than
    // kRemoveTreeMaxDepth besides those open now (the listing's own included).
    rlim_t open = 0;
    for (const auto& e : fs::directory_iterator("/proc/self/fd")) open += e.exists() ? 1 : 0;
    const rlim_t limit = open + kRemoveTreeMaxDepth + 2;
    rlimit r{limit, limit};
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0) ::_exit(100);
    std::error_code ec;
    fs::remove_all(tree, ec);  // holds a descriptor per level: runs out of them
    if (!ec) ::_exit(101);
    ::_exit(removeTree(tree.string()));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "errno " << WEXITSTATUS(status)
                                    << " (100: setrlimit failed; 101: remove_all managed)";
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
}

// A bounded call removes its budget's worth and says the rest is left; the next calls go on, and
// each makes progress even where the tree is deeper than the budget.
TEST_F(RemoveTreeTest, ABudgetStopsTheRemovalAndTheNextCallGoesOn) {
  const fs::path tree = fs::path(dir_) / "tree";
  fs::create_directories(tree);
  for (int i = 0; i < 100; ++i) touch(tree / std::to_string(i));
  EXPECT_EQ(removeTreeWithin(tree.string(), 10), EINPROGRESS);
  size_t left = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(tree)) ++left;
  EXPECT_EQ(left, 90u);
  EXPECT_EQ(removeTreeWithin(tree.string(), 1000), 0);
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));

  fs::create_directories(tree);
  makeDeep(tree.string(), 3 * kRemoveTreeMaxDepth);
  int calls = 0;
  int err = EINPROGRESS;
  while (err == EINPROGRESS && calls < 100'000) {
    err = removeTreeWithin(tree.string(), 1);
    ++calls;
  }
  EXPECT_EQ(err, 0) << "after " << calls << " calls";
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
}

// The wipe and the agent's background removal can remove one tree at the same time: each finds
// directories the other removed (a deleted directory reads as ENOENT) and still succeeds.
TEST_F(RemoveTreeTest, TwoRemovalsOfOneTreeAtOnceBothSucceed) {
  for (int round = 0; round < 8; ++round) {
    const fs::path tree = fs::path(dir_) / "tree";
    for (int d = 0; d < 40; ++d) {
      fs::create_directories(tree / std::to_string(d) / "sub");
      for (int f = 0; f < 5; ++f) touch(tree / std::to_string(d) / "sub" / std::to_string(f));
    }
    int other = -1;
    std::thread second([&] { other = removeTree(tree.string()); });
    const int mine = removeTree(tree.string());
    second.join();
    ASSERT_EQ(mine, 0) << std::strerror(mine) << " in round " << round;
    ASSERT_EQ(other, 0) << std::strerror(other) << " in round " << round;
    ASSERT_FALSE(fs::exists(fs::symlink_status(tree)));
  }
}

// The owner of the tree may fill its top with names a hoisted subtree could be given: they are
// random, so a deep tree still goes however many the owner made.
TEST_F(RemoveTreeTest, NamesMadeAtTheTopDoNotStopAHoist) {
  const fs::path tree = fs::path(dir_) / "tree";
  fs::create_directories(tree);
  for (int i = 0; i < 1000; ++i) fs::create_directories(tree / (".allot-removing-" + std::to_string(i)) / "full");
  makeDeep(tree.string(), 2 * kRemoveTreeMaxDepth);
  EXPECT_EQ(removeTree(tree.string()), 0);
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
}

// tmpfs before Linux 6.6 (RHEL 8 and 9, Ubuntu 22.04: /dev/shm, /run, where the state dir goes)
// gives a directory's entries offsets that count the entries still there: seeking back to one
// after removing others skips entries. ramfs still reads directories that way.
TEST_F(RemoveTreeTest, RemovesEverythingOnAFileSystemWhoseOffsetsCountEntries) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting ramfs needs root";
  const fs::path mount = fs::path(dir_) / "ram";
  fs::create_directories(mount);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("ramfs", mount.c_str(), "ramfs", 0, nullptr) != 0) {
      ::_exit(100);
    }
    // Files around a subdirectory, as a job's directory holds its log around work/.
    const fs::path small = mount / "small";
    for (const char* name : {"f1", "sub/inside", "f2", "f3"}) {
      fs::create_directories((small / name).parent_path());
      touch(small / name);
    }
    const fs::path many = mount / "many";
    fs::create_directories(many);
    for (int i = 0; i < 2000; ++i) {
      const fs::path p = many / ("entry-" + std::to_string(i));
      if (i % 10 == 0) {
        fs::create_directory(p);
        touch(p / "inside");
      } else {
        touch(p);
      }
    }
    if (int err = removeTree(small.string()); err != 0) ::_exit(err);
    if (int err = removeTree(many.string()); err != 0) ::_exit(err);
    ::_exit(fs::exists(small) || fs::exists(many) ? 101 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "errno " << WEXITSTATUS(status)
                                    << " (100: no ramfs mount; 101: something is left)";
}

}  // namespace
}  // namespace allot::agent
