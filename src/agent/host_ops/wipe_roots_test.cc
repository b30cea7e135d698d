#include "agent/host_ops/wipe_roots.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "agent/test_dirs.h"

namespace allot::agent {
namespace {

class WipeRootsTest : public testdirs::TempDirTest {
 protected:
  WipeRootsTest() : TempDirTest("wipe-roots") {}
};

// A root given with a trailing "/", "." or ".." segments, or through a symlink, is still seen
// to hold the work dir: each of these once passed the check, and a wipe would have emptied the
// agent's own state.
TEST_F(WipeRootsTest, ARootThatHoldsTheWorkDirIsSeenHoweverItIsSpelled) {
  const std::string work = dir_ + "/state/agent";
  std::filesystem::create_directories(work);
  std::filesystem::create_symlink(dir_ + "/state", dir_ + "/link");
  for (const std::string& root :
       {dir_ + "/state", dir_ + "/state/", dir_ + "/state/.", dir_ + "/other/../state",
        dir_ + "/link", dir_ + "/link/", work, work + "/", std::string("/"), dir_ + "//state//"}) {
    EXPECT_TRUE(holdsDir(root, work)) << root;
  }
  for (const std::string& root :
       {dir_ + "/scratch", dir_ + "/state/agent-scratch", dir_ + "/stat", work + "/../agent2"}) {
    EXPECT_FALSE(holdsDir(root, work)) << root;
  }
  // And the work dir given through the symlink is seen under the real root.
  EXPECT_TRUE(holdsDir(dir_ + "/state", dir_ + "/link/agent/"));
}

TEST_F(WipeRootsTest, PathsAreKeptAsGivenButAbsoluteAndNormal) {
  EXPECT_EQ(normalPath(dir_ + "/new/./dir/../scratch/"), dir_ + "/new/scratch");
  EXPECT_EQ(normalPath(dir_ + "/link/"), dir_ + "/link");  // a symlink stays one: wipe refuses it
  EXPECT_EQ(normalPath("/"), "/");
}

}  // namespace
}  // namespace allot::agent
