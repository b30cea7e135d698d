#include "common/sealed_box.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/secrets.h"

namespace allot {
namespace {

namespace fs = std::filesystem;

class SealedBoxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    initSecrets();
    dir_ = fs::temp_directory_path() / ("sealed-box-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SealedBoxTest, ASealedSecretOpensWithItsKeyOnly) {
  const std::string key = newSealKey();
  const std::string sealed = seal(key, "hunter2");
  EXPECT_EQ(sealed.find("hunter2"), std::string::npos);
  EXPECT_NE(seal(key, "hunter2"), sealed);  // a fresh nonce each time
  auto opened = unseal(key, sealed);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_EQ(*opened, "hunter2");
  EXPECT_FALSE(unseal(newSealKey(), sealed).ok());
  EXPECT_EQ(*unseal(key, seal(key, "")), "");
}

TEST_F(SealedBoxTest, AnythingElseIsRefusedNotCrashedOn) {
  const std::string key = newSealKey();
  std::string tampered = seal(key, "hunter2");
  tampered[tampered.size() - 3] = tampered[tampered.size() - 3] == 'A' ? 'B' : 'A';
  for (const std::string& bad :
       {std::string(""), std::string("v1."), std::string("v1.!!!"), std::string("v2.AAAA"),
        std::string("hunter2"), tampered, std::string("v1.") + std::string(10000, 'A')})
    EXPECT_FALSE(unseal(key, bad).ok()) << bad;
  EXPECT_FALSE(unseal("short", seal(key, "x")).ok());
}

TEST_F(SealedBoxTest, TheKeyFileIsMadeOnceOwnerOnlyAndCheckedWhenRead) {
  const std::string path = (dir_ / "seal.key").string();
  auto made = loadOrCreateSealKey(path);
  ASSERT_TRUE(made.ok()) << made.status().message();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = loadOrCreateSealKey(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *made);

  ::chmod(path.c_str(), 0644);
  EXPECT_FALSE(loadOrCreateSealKey(path).ok());
  ::chmod(path.c_str(), 0600);
  std::ofstream(path, std::ios::app) << "x";
  EXPECT_FALSE(loadOrCreateSealKey(path).ok());

  // A link planted where the key goes is neither followed nor written through.
  const std::string target = (dir_ / "elsewhere").string();
  const std::string link = (dir_ / "linked.key").string();
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_FALSE(loadOrCreateSealKey(link).ok());
  EXPECT_FALSE(fs::exists(target));
}

}  // namespace
}  // namespace allot
