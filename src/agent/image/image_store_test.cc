// The image store against a real registry (Debian's docker-registry) on loopback, with images
// the test builds itself from files on this machine (busybox) with umoci and pushes with skopeo.

#include "agent/image/image_store.h"

#include <gtest/gtest.h>
#include <sodium.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <thread>

#include "agent/image/image_puller.h"
#include "agent/image/test_registry.h"

namespace allot::agent {
namespace {

namespace fs = std::filesystem;

// One registry and the test's images for the whole suite: building them is the slow part.
class ImageStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_GE(sodium_init(), 0);
    char tmpl[] = "/tmp/allot-image-test-XXXXXX";
    root_ = mkdtemp(tmpl);
    registry_ = std::make_unique<testsupport::TestRegistry>(root_);
  }
  static void TearDownTestSuite() {
    registry_.reset();
    fs::remove_all(root_);
  }

  void SetUp() override {
    store_ = root_ + "/store-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void TearDown() override { fs::remove_all(store_); }

  ImageStore store() { return ImageStore(options({registry()})); }
  ImageStoreOptions options(std::vector<std::string> insecure) const {
    ImageStoreOptions o;
    o.root = store_;
    o.unpacker = ALLOT_LAYER_UNPACK_PATH;
    o.insecureRegistries = std::move(insecure);
    return o;
  }
  static ImageRef ref(const std::string& text) { return parseImageRef(text).value(); }
  static std::string registry() { return registry_->address(); }

  static inline std::string root_;
  static inline std::unique_ptr<testsupport::TestRegistry> registry_;
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

// Forgets what find() and pull() handed out: the agent's loop calls setInUse each tick, so a
// hand-out outlives two of them.
void settle(ImageStore& s, std::set<std::string> refs = {}, std::set<std::string> layers = {}) {
  s.setInUse(refs, layers);
  s.setInUse(refs, layers);
}

size_t filesIn(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    ++n;
  return n;
}

TEST_F(ImageStoreTest, PruneRemovesWhatNoJobUsesAndKeepsWhatRunningContainersMount) {
  ImageStore s = store();
  auto base = s.pull(ref(registry() + "/test/base:1"));
  auto app = s.pull(ref(registry() + "/test/app:1"));
  ASSERT_TRUE(base.ok() && app.ok());
  const int64_t both = s.diskBytes();
  EXPECT_GT(both, 0);
  // Just pulled: its job has not had a tick to start, so it stays.
  auto early = s.prune();
  ASSERT_TRUE(early.ok());
  EXPECT_TRUE(early->refs.empty());

  // A job runs in app: base goes; the layer they share stays, and app still runs from it.
  settle(s, {app->ref}, {app->layers.begin(), app->layers.end()});
  auto pruned = s.prune();
  ASSERT_TRUE(pruned.ok()) << pruned.status().message();
  EXPECT_EQ(pruned->refs, std::vector<std::string>{base->ref});
  EXPECT_GT(pruned->freedBytes, 0);
  EXPECT_EQ(s.diskBytes(), both - pruned->freedBytes);
  EXPECT_FALSE(s.find(ref(base->ref)).has_value());
  EXPECT_TRUE(s.find(ref(app->ref)).has_value());
  EXPECT_TRUE(fs::exists(store_ + "/layers/" + base->layers[0] + "/bin/busybox"));

  // Re-adopted after a restart, a container names its layers; its image record may go, but
  // not the layers it mounts.
  settle(s, {}, {app->layers.begin(), app->layers.end()});
  pruned = s.prune();
  ASSERT_TRUE(pruned.ok());
  EXPECT_EQ(pruned->refs, std::vector<std::string>{app->ref});
  for (const auto& hex : app->layers) EXPECT_TRUE(fs::is_directory(store_ + "/layers/" + hex));

  // Nothing runs: every blob and layer goes, and the layout's index names no image.
  settle(s);
  ASSERT_TRUE(s.prune().ok());
  EXPECT_EQ(filesIn(store_ + "/layers"), 0u);
  EXPECT_EQ(filesIn(store_ + "/oci/blobs/sha256"), 0u);
  EXPECT_EQ(s.diskBytes(), 0);
  std::ifstream index(store_ + "/oci/index.json");
  std::string text((std::istreambuf_iterator<char>(index)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find("ref-"), std::string::npos) << text;
  // And the store pulls again as before.
  auto again = s.pull(ref(registry() + "/test/app:1"));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->digest, app->digest);
}

TEST_F(ImageStoreTest, ABudgetEvictsTheLeastRecentlyUsedImagesNoJobUses) {
  // Last use is kept to the minute (find()): the clock moves a minute at a time.
  constexpr int64_t kMinute = 60'000;
  int64_t now = 1 * kMinute;
  auto opts = [&](int64_t budget) {
    ImageStoreOptions o = options({registry()});
    o.budgetBytes = budget;
    o.nowMs = [&now] { return now; };
    return o;
  };
  int64_t both = 0;
  std::string baseRef, appRef;
  {
    ImageStore unbounded(opts(0));
    auto base = unbounded.pull(ref(registry() + "/test/base:1"));
    now = 2 * kMinute;
    auto app = unbounded.pull(ref(registry() + "/test/app:1"));
    ASSERT_TRUE(base.ok() && app.ok());
    baseRef = base->ref;
    appRef = app->ref;
    both = unbounded.diskBytes();
  }
  // One byte under what both take. Base was used last, at minute 3: app is the one to go.
  ImageStore s(opts(both - 1));
  now = 3 * kMinute;
  ASSERT_TRUE(s.find(ref(baseRef)).has_value());
  // A start within the same minute rewrites nothing.
  now = 3 * kMinute + 30'000;
  ASSERT_TRUE(s.find(ref(baseRef)).has_value());
  for (const auto& i : s.list()) {
    if (i.ref == baseRef) {
      EXPECT_EQ(i.lastUsedMs, 3 * kMinute);
    }
  }
  settle(s);
  auto evicted = s.evict();
  ASSERT_TRUE(evicted.ok()) << evicted.status().message();
  EXPECT_EQ(evicted->refs, std::vector<std::string>{appRef});
  EXPECT_LE(s.diskBytes(), both - 1);
  EXPECT_TRUE(s.find(ref(baseRef)).has_value());

  // Over budget, but every image is in use: nothing goes.
  ImageStore tight(opts(1));
  settle(tight, {baseRef}, {});
  evicted = tight.evict();
  ASSERT_TRUE(evicted.ok());
  EXPECT_TRUE(evicted->refs.empty());

  // A pull makes room for itself: app in, base (in use no more) out.
  settle(tight);
  now = 4 * kMinute;
  auto app = tight.pull(ref(registry() + "/test/app:1"));
  ASSERT_TRUE(app.ok()) << app.status().message();
  auto listed = tight.list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].ref, appRef);
  EXPECT_EQ(listed[0].lastUsedMs, 4 * kMinute);
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
  ImageStore s(options({}));
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
  ImageStore s(options({"127.0.0.1:9"}));
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
  const std::string data = registry_->storage() + "/docker/registry/v2/blobs/sha256/" +
                           hex.substr(0, 2) + "/" + hex + "/data";
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

// Polls `pred` every 20 ms for at most 60 s (a pull on a loaded 2-core machine).
bool eventually(const std::function<bool()>& pred) {
  for (int i = 0; i < 3000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

TEST_F(ImageStoreTest, FindAnswersFromWhatAPullRecordedWithoutAskingTheRegistry) {
  ImageStore s = store();
  EXPECT_FALSE(s.find(ref(registry() + "/test/base:1")));
  PullProgress progress;
  auto pulled = s.pull(ref(registry() + "/test/base:1"), nullptr, &progress);
  ASSERT_TRUE(pulled.ok()) << pulled.status().message();
  // The manifest's sizes, read before the copy, and all of them fetched.
  EXPECT_GE(progress.total.load(), pulled->bytes);
  EXPECT_EQ(progress.bytes.load(), progress.total.load());
  auto found = s.find(ref(registry() + "/test/base:1"));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->digest, pulled->digest);
  EXPECT_EQ(found->layers, pulled->layers);
  EXPECT_FALSE(s.find(ref(registry() + "/test/app:1")));
  // A layer that is gone (pruned by hand) makes the record worthless: pulled again.
  fs::remove_all(store_ + "/layers/" + pulled->layers[0]);
  EXPECT_FALSE(s.find(ref(registry() + "/test/base:1")));
}

TEST_F(ImageStoreTest, ThePullerRetriesARegistryThatDoesNotAnswerAndFailsWhatIsNotThere) {
  ImageStore s = store();
  ImagePuller puller(s, {std::chrono::milliseconds(100), std::chrono::milliseconds(400)});
  using Kind = ImagePuller::State::Kind;
  // Pulled off the caller's thread; the caller looks again until it is there.
  EXPECT_EQ(puller.want(1, ref(registry() + "/test/base:1")).kind, Kind::kPulling);
  ASSERT_TRUE(eventually([&] { return puller.stateOf(1)->kind != Kind::kPulling; }));
  auto one = puller.stateOf(1);
  ASSERT_EQ(one->kind, Kind::kReady) << one->failure.message();
  puller.release(1);
  EXPECT_FALSE(puller.stateOf(1));
  // Held here now: a second job gets it at once, without a pull.
  auto two = puller.want(2, ref(registry() + "/test/base:1"));
  EXPECT_EQ(two.kind, Kind::kReady);
  EXPECT_EQ(two.image->digest, one->image->digest);
  EXPECT_FALSE(puller.stateOf(2));

  // Not there: final, with the reference named.
  puller.want(3, ref(registry() + "/test/nothing:1"));
  ASSERT_TRUE(eventually([&] { return puller.stateOf(3)->kind != Kind::kPulling; }));
  EXPECT_EQ(puller.stateOf(3)->kind, Kind::kFailed);
  EXPECT_EQ(puller.stateOf(3)->failure.message(),
            "image not found: " + registry() + "/test/nothing:1");
  puller.release(3);

  // A registry that does not answer: the job waits, told why and when the next try is, and the
  // pull goes through once the registry is back.
  registry_->stop();
  puller.want(4, ref(registry() + "/test/app:1"));
  ASSERT_TRUE(eventually([&] {
    return puller.stateOf(4)->message.find("trying again in") != std::string::npos;
  })) << puller.stateOf(4)->message;
  EXPECT_EQ(puller.stateOf(4)->kind, Kind::kPulling);
  registry_->start();
  ASSERT_TRUE(eventually([&] { return puller.stateOf(4)->kind != Kind::kPulling; }));
  EXPECT_EQ(puller.stateOf(4)->kind, Kind::kReady) << puller.stateOf(4)->failure.message();
  EXPECT_EQ(puller.stateOf(4)->image->layers.size(), 2u);
}

// A registry that serves one account only (htpasswd), as a team's private registry does.
TEST_F(ImageStoreTest, ALoginPullsWhatTheRegistryKeepsFromOthersAndOnlyItsAccountReusesIt) {
  const std::string dir = root_ + "/private";
  fs::create_directories(dir);
  testsupport::TestRegistry priv(dir, "ml-puller:s3cret");
  ImageStore s(options({priv.address()}));
  const ImageRef base = ref(priv.address() + "/test/base:1");
  const PullLogin login{priv.address(), "ml-puller", "s3cret"};

  // Without a login, or with a wrong one: refused, saying so, and nothing is kept.
  auto anonymous = s.pull(base);
  ASSERT_FALSE(anonymous.ok());
  EXPECT_EQ(anonymous.status().code(), Code::kPermissionDenied) << anonymous.status().message();
  EXPECT_NE(anonymous.status().message().find("no login"), std::string::npos)
      << anonymous.status().message();
  const PullLogin wrong{priv.address(), "ml-puller", "guess"};
  EXPECT_EQ(s.pull(base, &wrong).status().code(), Code::kPermissionDenied);
  EXPECT_FALSE(s.find(base));
  // A login for another registry is not presented to this one.
  const PullLogin elsewhere{"registry.example.com", "ml-puller", "s3cret"};
  EXPECT_EQ(s.pull(base, &elsewhere).status().code(), Code::kPermissionDenied);

  auto pulled = s.pull(base, &login);
  ASSERT_TRUE(pulled.ok()) << pulled.status().message();
  // Recorded as the login's fingerprint: the username, never the password.
  ASSERT_EQ(pulled->accounts.size(), 1u);
  EXPECT_EQ(pulled->accounts[0].rfind("ml-puller:", 0), 0u) << pulled->accounts[0];
  EXPECT_EQ(pulled->accounts[0].find("s3cret"), std::string::npos);
  // The login was written for that pull alone, and is gone.
  for (const auto& e : fs::directory_iterator(store_ + "/tmp"))
    EXPECT_EQ(e.path().filename().string().rfind("auth-", 0), std::string::npos) << e.path();

  // Held here, but handed only to jobs with the login that fetched it: another team's job (no
  // login, another account, or the same username with a guessed password) must get it from the
  // registry itself.
  EXPECT_TRUE(s.find(base, &login));
  EXPECT_FALSE(s.find(base));
  const PullLogin other{priv.address(), "cv-puller", "s3cret"};
  EXPECT_FALSE(s.find(base, &other));
  EXPECT_FALSE(s.find(base, &wrong));
  EXPECT_EQ(s.pull(base).status().code(), Code::kPermissionDenied);
  EXPECT_TRUE(s.find(base, &login));  // that refusal took nothing from the login

  // Through the puller, into an empty store: jobs with another login, or none, do not share the
  // pull of a job with the right one, even while it runs.
  ImageStoreOptions fresh = options({priv.address()});
  fresh.root = store_ + "-fresh";
  ImageStore empty(fresh);
  ImagePuller puller(empty, {std::chrono::milliseconds(10), std::chrono::milliseconds(100)});
  using Kind = ImagePuller::State::Kind;
  EXPECT_EQ(puller.want(1, base, &login).kind, Kind::kPulling);
  EXPECT_EQ(puller.want(2, base, &wrong).kind, Kind::kPulling);
  EXPECT_EQ(puller.want(3, base).kind, Kind::kPulling);
  for (int64_t job : {1, 2, 3})
    ASSERT_TRUE(eventually([&] { return puller.stateOf(job)->kind != Kind::kPulling; }));
  EXPECT_EQ(puller.stateOf(1)->kind, Kind::kReady);
  EXPECT_EQ(puller.stateOf(2)->kind, Kind::kFailed);
  EXPECT_EQ(puller.stateOf(3)->kind, Kind::kFailed);
  for (int64_t job : {1, 2, 3}) puller.release(job);
  fs::remove_all(fresh.root);
}

}  // namespace
}  // namespace allot::agent
