// The image store against a real registry (Debian's docker-registry) on loopback, with images
// the test builds itself from files on this machine (busybox) with umoci and pushes with skopeo.

#include "agent/image/image_store.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sodium.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

namespace allot::agent {
namespace {

namespace fs = std::filesystem;

int freePort() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

bool answers(int port) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

bool sh(const std::string& script) { return std::system(("set -e\n" + script).c_str()) == 0; }

// One registry and the test's images for the whole suite: building them is the slow part.
class ImageStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_GE(sodium_init(), 0);
    char tmpl[] = "/tmp/allot-image-test-XXXXXX";
    root_ = mkdtemp(tmpl);
    port_ = freePort();
    registry_ = root_ + "/registry";
    std::ofstream(root_ + "/registry.yml")
        << "version: 0.1\nlog: {level: error}\nstorage:\n  filesystem: {rootdirectory: "
        << registry_ << "}\nhttp:\n  addr: 127.0.0.1:" << port_ << "\n";
    registryPid_ = ::fork();
    if (registryPid_ == 0) {
      ::freopen((root_ + "/registry.log").c_str(), "w", stderr);
      ::dup2(2, 1);  // its access log
      ::execl("/usr/bin/docker-registry", "docker-registry", "serve",
              (root_ + "/registry.yml").c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 500 && !answers(port_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(answers(port_)) << "docker-registry did not start";
    // base: busybox and a marker file; app: base plus a file, less bin/wc (a whiteout).
    const std::string l = root_ + "/layout", b = root_ + "/bundle";
    ASSERT_TRUE(sh("umoci init --layout " + l + "\numoci new --image " + l + ":base\n" +
                   "umoci unpack --image " + l + ":base " + b + "\n" + "mkdir -p " + b +
                   "/rootfs/bin " + b + "/rootfs/etc\n" + "cp /bin/busybox " + b +
                   "/rootfs/bin/busybox\n" + "for a in sh cat ls wc true; do ln -s busybox " + b +
                   "/rootfs/bin/$a; done\n" + "echo base > " + b +
                   "/rootfs/etc/allot-test-image\n" + "umoci repack --image " + l + ":base " + b +
                   "\n" + "umoci config --image " + l +
                   ":base --config.cmd /bin/sh --config.env ALLOT_IMAGE=base "
                   "--config.workingdir /etc\n" +
                   "rm -rf " + b + "\numoci unpack --image " + l + ":base " + b + "\n" +
                   "echo app > " + b + "/rootfs/etc/allot-app\nrm " + b + "/rootfs/bin/wc\n" +
                   "umoci repack --image " + l + ":app " + b + "\numoci gc --layout " + l + "\n"))
        << "building the test images failed";
    for (const char* tag : {"base", "app"}) {
      ASSERT_TRUE(sh("skopeo --insecure-policy copy --quiet --dest-tls-verify=false oci:" + l +
                     ":" + tag + " docker://127.0.0.1:" + std::to_string(port_) + "/test/" + tag +
                     ":1"));
    }
  }
  static void TearDownTestSuite() {
    if (registryPid_ > 0) {
      ::kill(registryPid_, SIGTERM);
      ::waitpid(registryPid_, nullptr, 0);
    }
    fs::remove_all(root_);
  }

  void SetUp() override {
    store_ = root_ + "/store-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void TearDown() override { fs::remove_all(store_); }

  ImageStore store() {
    return ImageStore({store_,
                       "/usr/bin/skopeo",
                       ALLOT_LAYER_UNPACK_PATH,
                       {"127.0.0.1:" + std::to_string(port_)}});
  }
  static ImageRef ref(const std::string& text) { return parseImageRef(text).value(); }
  static std::string registry() { return "127.0.0.1:" + std::to_string(port_); }

  static inline std::string root_, registry_;
  static inline int port_ = 0;
  static inline pid_t registryPid_ = -1;
  std::string store_;
};

TEST_F(ImageStoreTest, PullsAnImageUnpacksItsLayersAndRecordsItsDigestAndConfig) {
  ImageStore s = store();
  auto image = s.pull(ref(registry() + "/test/base:1"));
  ASSERT_TRUE(image.ok()) << image.status().message();
  EXPECT_EQ(image->digest.rfind("sha256:", 0), 0u);
  EXPECT_EQ(image->digest.size(), 71u);
  ASSERT_EQ(image->layers.size(), 1u);
  EXPECT_GT(image->bytes, 0);
  EXPECT_EQ(image->config.cmd, std::vector<std::string>{"/bin/sh"});
  EXPECT_EQ(image->config.workingDir, "/etc");
  EXPECT_NE(std::find(image->config.env.begin(), image->config.env.end(), "ALLOT_IMAGE=base"),
            image->config.env.end());
  auto lower = s.lowerDirs(*image);
  ASSERT_EQ(lower.size(), 1u);
  EXPECT_TRUE(fs::exists(lower[0] + "/bin/busybox"));
  std::ifstream marker(lower[0] + "/etc/allot-test-image");
  std::string text;
  marker >> text;
  EXPECT_EQ(text, "base");
  struct stat root {};
  ASSERT_EQ(::stat(store_.c_str(), &root), 0);
  EXPECT_EQ(root.st_mode & 0777, 0700u);  // layers keep their owners: no other user reaches them
  auto listed = s.list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].digest, image->digest);

  // By digest: the same image, pinned.
  auto pinned = s.pull(ref(registry() + "/test/base@" + image->digest));
  ASSERT_TRUE(pinned.ok()) << pinned.status().message();
  EXPECT_EQ(pinned->digest, image->digest);
}

TEST_F(ImageStoreTest, TwoImagesSharingABaseLayerStoreAndUnpackItOnce) {
  ImageStore s = store();
  auto base = s.pull(ref(registry() + "/test/base:1"));
  ASSERT_TRUE(base.ok()) << base.status().message();
  struct stat before {};
  ASSERT_EQ(::stat((store_ + "/layers/" + base->layers[0]).c_str(), &before), 0);
  auto app = s.pull(ref(registry() + "/test/app:1"));
  ASSERT_TRUE(app.ok()) << app.status().message();
  ASSERT_EQ(app->layers.size(), 2u);
  EXPECT_EQ(app->layers[0], base->layers[0]);
  struct stat after {};
  ASSERT_EQ(::stat((store_ + "/layers/" + base->layers[0]).c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);  // not unpacked again
  size_t layers = 0;
  for (const auto& e : fs::directory_iterator(store_ + "/layers")) layers += e.is_directory();
  EXPECT_EQ(layers, 2u);
  // The app's own layer hides bin/wc with an overlay whiteout and adds its file.
  struct stat wc {};
  ASSERT_EQ(::lstat((store_ + "/layers/" + app->layers[1] + "/bin/wc").c_str(), &wc), 0);
  EXPECT_TRUE(S_ISCHR(wc.st_mode));
  EXPECT_TRUE(fs::exists(store_ + "/layers/" + app->layers[1] + "/etc/allot-app"));
  EXPECT_EQ(s.lowerDirs(*app).front(), store_ + "/layers/" + app->layers[1]);
}

TEST_F(ImageStoreTest, AnUnknownTagOrRepositoryIsImageNotFound) {
  ImageStore s = store();
  for (const std::string& missing :
       std::vector<std::string>{"/test/base:nope", "/test/nothing:1"}) {
    auto image = s.pull(ref(registry() + missing));
    ASSERT_FALSE(image.ok());
    EXPECT_EQ(image.status().code(), Code::kNotFound) << image.status().message();
    EXPECT_NE(image.status().message().find("image not found: " + registry() + missing),
              std::string::npos)
        << image.status().message();
  }
  EXPECT_TRUE(s.list().empty());
}

TEST_F(ImageStoreTest, ARegistryOnThisHostOrItsLinkIsRefusedUnlessListed) {
  ImageStore s({store_, "/usr/bin/skopeo", ALLOT_LAYER_UNPACK_PATH, {}});
  for (const std::string& text :
       std::vector<std::string>{registry() + "/test/base:1", "localhost:5000/test/base:1",
                                "169.254.169.254/latest/meta-data:1", "127.1.2.3:80/x/y:1"}) {
    auto image = s.pull(ref(text));
    ASSERT_FALSE(image.ok()) << text;
    EXPECT_EQ(image.status().code(), Code::kPermissionDenied) << image.status().message();
    EXPECT_NE(image.status().message().find("only an admin-listed registry"), std::string::npos)
        << image.status().message();
  }
  EXPECT_TRUE(s.list().empty());
}

TEST_F(ImageStoreTest, ARegistryThatDoesNotAnswerIsWorthRetrying) {
  ImageStore s({store_, "/usr/bin/skopeo", ALLOT_LAYER_UNPACK_PATH, {"127.0.0.1:9"}});
  auto image = s.pull(ref("127.0.0.1:9/test/base:1"));
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), Code::kUnavailable) << image.status().message();
}

TEST_F(ImageStoreTest, ALayerWhoseBytesDoNotMatchItsDigestIsRefusedAndNothingIsRecorded) {
  // A copy of the registry whose app layer has a byte changed on disk.
  ImageStore good = store();
  auto app = good.pull(ref(registry() + "/test/app:1"));
  ASSERT_TRUE(app.ok()) << app.status().message();
  const std::string hex = app->layers[1];
  const std::string data =
      registry_ + "/docker/registry/v2/blobs/sha256/" + hex.substr(0, 2) + "/" + hex + "/data";
  std::string saved;
  {
    std::ifstream in(data, std::ios::binary);
    saved.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_FALSE(saved.empty()) << data;
  std::string bad = saved;
  bad[bad.size() / 2] ^= 0x55;
  std::ofstream(data, std::ios::binary | std::ios::trunc) << bad;
  fs::remove_all(store_);
  ImageStore s = store();
  auto image = s.pull(ref(registry() + "/test/app:1"));
  std::ofstream(data, std::ios::binary | std::ios::trunc) << saved;
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), Code::kInvalidArgument) << image.status().message();
  EXPECT_TRUE(s.list().empty());
  EXPECT_FALSE(fs::exists(store_ + "/layers/" + hex));
}

}  // namespace
}  // namespace allot::agent
