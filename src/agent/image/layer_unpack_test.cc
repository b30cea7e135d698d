#include "agent/image/layer_unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sodium.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/image/digest.h"

namespace allot::agent {
namespace {

namespace fs = std::filesystem;

// One entry of a layer the test writes with libarchive, hostile names included.
struct Entry {
  std::string name;
  mode_t type = AE_IFREG;
  std::string contents;  // a file's bytes, a symlink's target
  std::string hardlink;  // set: a hard link to this name
  mode_t perm = 0644;
  int uid = 0, gid = 0;
};

Entry file(std::string name, std::string contents = "", mode_t perm = 0644, int uid = 0,
           int gid = 0) {
  return Entry{std::move(name), AE_IFREG, std::move(contents), "", perm, uid, gid};
}
Entry dir(std::string name) { return Entry{std::move(name), AE_IFDIR, "", "", 0755, 0, 0}; }
Entry symlink(std::string name, std::string to) {
  return Entry{std::move(name), AE_IFLNK, std::move(to), "", 0777, 0, 0};
}
Entry hardlink(std::string name, std::string to) {
  return Entry{std::move(name), AE_IFREG, "", std::move(to), 0644, 0, 0};
}
Entry special(std::string name, mode_t type) {
  return Entry{std::move(name), type, "", "", 0644, 0, 0};
}

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class LayerUnpackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(sodium_init(), 0);
    char tmpl[] = "/tmp/allot-layer-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    fs::create_directories(dir_ + "/outside");
    fs::create_directories(dir_ + "/layer");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A gzip-compressed pax tar of `entries` at dir_/layer.tar.gz; its sha256.
  std::string writeLayer(const std::vector<Entry>& entries) {
    const std::string path = dir_ + "/layer.tar.gz";
    struct archive* a = archive_write_new();
    archive_write_add_filter_gzip(a);
    archive_write_set_format_pax_restricted(a);
    EXPECT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
    for (const Entry& e : entries) {
      struct archive_entry* ae = archive_entry_new();
      archive_entry_set_pathname(ae, e.name.c_str());
      archive_entry_set_uid(ae, e.uid);
      archive_entry_set_gid(ae, e.gid);
      archive_entry_set_perm(ae, e.perm);
      archive_entry_set_mtime(ae, 1'700'000'000, 0);
      if (!e.hardlink.empty()) {
        archive_entry_set_filetype(ae, AE_IFREG);
        archive_entry_set_hardlink(ae, e.hardlink.c_str());
        archive_entry_set_size(ae, 0);
      } else {
        archive_entry_set_filetype(ae, e.type);
        if (e.type == AE_IFLNK) archive_entry_set_symlink(ae, e.contents.c_str());
        if (e.type == AE_IFCHR) archive_entry_set_rdev(ae, makedev(1, 3));
        archive_entry_set_size(ae,
                               e.type == AE_IFREG ? static_cast<la_int64_t>(e.contents.size()) : 0);
      }
      EXPECT_EQ(archive_write_header(a, ae), ARCHIVE_OK) << e.name;
      if (e.type == AE_IFREG && e.hardlink.empty() && !e.contents.empty())
        archive_write_data(a, e.contents.data(), e.contents.size());
      archive_entry_free(ae);
    }
    archive_write_close(a);
    archive_write_free(a);
    return sha256Hex(readAll(path));
  }

  Result<LayerStats> unpack(const std::string& digest, const LayerLimits& limits = {},
                            LayerRefusal* refusal = nullptr) {
    int fd = ::open((dir_ + "/layer").c_str(), O_RDONLY | O_DIRECTORY);
    auto r = unpackLayer(dir_ + "/layer.tar.gz", digest, fd, limits, refusal);
    ::close(fd);
    return r;
  }
  std::string in(const std::string& name) { return dir_ + "/layer/" + name; }

  std::string dir_;
};

TEST_F(LayerUnpackTest, UnpacksFilesDirectoriesLinksOwnersAndModes) {
  std::string digest = writeLayer({
      dir("./bin/"),
      file("./bin/tool", "#!/bin/sh\necho hi\n", 04755),
      file("./home/alice/notes", "mine", 0600, 1234, 5678),
      symlink("./bin/tool-link", "/bin/tool"),
      hardlink("./bin/tool-again", "bin/tool"),
      special("./run/pipe", AE_IFIFO),
      special("./dev/null", AE_IFCHR),
  });
  auto stats = unpack(digest);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(readAll(in("bin/tool")), "#!/bin/sh\necho hi\n");
  struct stat st {};
  ASSERT_EQ(::stat(in("bin/tool").c_str(), &st), 0);
  // No set-ID bit survives: a copy the host could reach must not give root to whoever runs it.
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(st.st_nlink, 2u);  // and bin/tool-again
  EXPECT_EQ(st.st_mtime, 1'700'000'000);
  ASSERT_EQ(::stat(in("home/alice/notes").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 5678u);
  EXPECT_EQ(fs::read_symlink(in("bin/tool-link")), "/bin/tool");
  EXPECT_TRUE(fs::is_fifo(in("run/pipe")));
  // A device node is nothing a container's root needs: its /dev is a tmpfs of its own.
  EXPECT_FALSE(fs::exists(fs::symlink_status(in("dev/null"))));
  EXPECT_EQ(stats->skipped, 1);
  EXPECT_EQ(stats->bytes, 22);
}

TEST_F(LayerUnpackTest, WhiteoutsBecomeOverlayWhiteoutsAndOpaqueMarkersAnAttribute) {
  std::string digest = writeLayer({
      file("etc/.wh.motd"),
      file("var/cache/.wh..wh..opq"),
  });
  auto stats = unpack(digest);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  struct stat st {};
  ASSERT_EQ(::lstat(in("etc/motd").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(0, 0));
  EXPECT_FALSE(fs::exists(in("etc/.wh.motd")));
  char value[4] = {};
  ASSERT_EQ(::getxattr(in("var/cache").c_str(), "trusted.overlay.opaque", value, sizeof value), 1)
      << std::strerror(errno);
  EXPECT_EQ(std::string(value, 1), "y");
  EXPECT_FALSE(fs::exists(in("var/cache/.wh..wh..opq")));
}

TEST_F(LayerUnpackTest, AnEntryThroughASymlinkTheLayerPlantedIsRefusedAndWritesNothingOutside) {
  std::string digest = writeLayer({
      symlink("etc", dir_ + "/outside"),
      file("etc/passwd", "root::0:0::/:/bin/sh\n"),
  });
  auto stats = unpack(digest);
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.status().message().find("etc/passwd"), std::string::npos)
      << stats.status().message();
  EXPECT_TRUE(fs::is_empty(dir_ + "/outside"));
}

TEST_F(LayerUnpackTest, ADotDotComponentIsRefused) {
  std::string digest = writeLayer({file("a/../../outside/evil", "x")});
  auto stats = unpack(digest);
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.status().message().find(".."), std::string::npos) << stats.status().message();
  EXPECT_TRUE(fs::is_empty(dir_ + "/outside"));
}

TEST_F(LayerUnpackTest, AnAbsoluteNameLandsInsideTheLayer) {
  std::string digest = writeLayer({file(dir_ + "/outside/abs", "x")});
  auto stats = unpack(digest);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_TRUE(fs::is_empty(dir_ + "/outside"));
  EXPECT_TRUE(fs::exists(in(dir_.substr(1) + "/outside/abs")));
}

TEST_F(LayerUnpackTest, AHardLinkOutOfTheLayerIsRefused) {
  std::ofstream(dir_ + "/outside/secret") << "secret";
  for (const std::vector<Entry>& layer :
       {std::vector<Entry>{hardlink("stolen", "../outside/secret")},
        std::vector<Entry>{symlink("out", dir_ + "/outside"), hardlink("stolen", "out/secret")}}) {
    fs::remove_all(dir_ + "/layer");
    fs::create_directories(dir_ + "/layer");
    auto stats = unpack(writeLayer(layer));
    EXPECT_FALSE(stats.ok());
    EXPECT_FALSE(fs::exists(in("stolen")));
    struct stat st {};
    ASSERT_EQ(::stat((dir_ + "/outside/secret").c_str(), &st), 0);
    EXPECT_EQ(st.st_nlink, 1u);
  }
}

TEST_F(LayerUnpackTest, ALayerPastItsBoundsIsRefused) {
  // Entries, unpacked bytes (a sparse file counts its whole size), depth and name length.
  LayerLimits tight;
  tight.maxEntries = 3;
  tight.maxBytes = 1000;
  tight.maxDepth = 4;
  tight.maxName = 64;
  struct Case {
    std::vector<Entry> layer;
    std::string says;
  };
  for (const Case& c :
       {Case{{file("a"), file("b"), file("c"), file("d")}, "entries"},
        Case{{file("big", std::string(1001, 'x'))}, "MiB"}, Case{{file("a/b/c/d/e")}, "deeper"},
        Case{{file(std::string(65, 'n'))}, "name over"}}) {
    fs::remove_all(dir_ + "/layer");
    fs::create_directories(dir_ + "/layer");
    LayerRefusal refusal = LayerRefusal::kNone;
    auto stats = unpack(writeLayer(c.layer), tight, &refusal);
    ASSERT_FALSE(stats.ok()) << c.says;
    EXPECT_NE(stats.status().message().find(c.says), std::string::npos) << stats.status().message();
    EXPECT_EQ(refusal, LayerRefusal::kInvalid);
  }
}

TEST_F(LayerUnpackTest, ANameWithControlBytesIsEscapedInWhatItSays) {
  auto stats = unpack(writeLayer({file("a/../\x1b[31mred", "x")}));
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().message().find('\x1b'), std::string::npos) << stats.status().message();
  EXPECT_NE(stats.status().message().find("\\x1b"), std::string::npos) << stats.status().message();
}

TEST_F(LayerUnpackTest, ALayerWhoseBytesDoNotHashToItsDigestIsRefused) {
  writeLayer({file("file", "x")});
  LayerRefusal refusal = LayerRefusal::kNone;
  auto stats = unpack(std::string(64, 'a'), {}, &refusal);
  EXPECT_EQ(refusal, LayerRefusal::kDigest);
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.status().message().find("digest mismatch"), std::string::npos)
      << stats.status().message();
}

TEST_F(LayerUnpackTest, SomethingThatIsNotATarIsRefused) {
  std::ofstream(dir_ + "/layer.tar.gz") << "this is no archive, only words";
  auto stats = unpack(sha256Hex("this is no archive, only words"));
  ASSERT_FALSE(stats.ok());
}

}  // namespace
}  // namespace allot::agent
