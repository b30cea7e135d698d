// Jobs in OCI images (docs/environments.md), end to end: a registry on loopback with images the
// test builds (agent/image/test_registry.h), allotd, a root agent whose workloads run as their
// owners, and the CLI. A job sees its image's files and not the host's, runs as its owner, and
// records the digest its image resolved to; the team's allow-list is enforced before any fetch;
// an image that is not there fails the job before it runs; a registry that does not answer
// leaves the job pulling until it is back. Needs root (crun, and switching users).

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <set>

#include "image_cluster.h"

namespace allot::it {
namespace {

namespace fs = std::filesystem;

class ImageJobTest : public ImageCluster<ImageJobTest> {
 protected:
  static void SetUpTestSuite() { startRegistry(); }
  void TearDown() override {
    if (registry_) registry_->start();  // a test that stopped it and failed half-way
    TestCluster::TearDown();
  }
};

TEST_F(ImageJobTest, AJobRunsInItsImageAsItsOwnerAndItsDigestIsRecordedForARerun) {
  const int64_t aliceUid = cliJson(adminToken_, {"user", "show", "alice"})["uid"].get<int64_t>();
  const int64_t id =
      submit(alice_, {"--image", image("app:1"), "--gpus", "1"},
             {"sh", "-c",
              "cat /etc/allot-app /etc/allot-test-image; echo uid=$(id -u) image=$ALLOT_IMAGE; "
              "ls /usr/bin/skopeo 2>/dev/null || echo host-hidden"});
  json last;
  ASSERT_TRUE(waitForJobState(alice_, id, "succeeded", &last)) << last.dump();
  const std::string out = logs(alice_, id);
  EXPECT_NE(out.find("app\nbase\n"), std::string::npos) << out;
  EXPECT_NE(out.find("uid=" + std::to_string(aliceUid) + " image=base"), std::string::npos) << out;
  EXPECT_NE(out.find("host-hidden"), std::string::npos) << out;
  EXPECT_EQ(textOf(last, "image"), image("app:1"));
  const std::string digest = textOf(last, "image_digest");
  ASSERT_EQ(digest.rfind("sha256:", 0), 0u) << last.dump();
  auto shown = cliAs(alice_, {"job", "show", std::to_string(id)});
  EXPECT_NE(shown.out.find("image digest"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find(digest), std::string::npos) << shown.out;

  // The same image, pinned by that digest, from the store this time.
  const int64_t pinned = submit(alice_, {"--image", registry_->address() + "/test/app@" + digest},
                                {"cat", "/etc/allot-app"});
  ASSERT_TRUE(waitForJobState(alice_, pinned, "succeeded", &last)) << last.dump();
  EXPECT_EQ(textOf(last, "image_digest"), digest);
  EXPECT_EQ(host("h1")["images"], true);
}

TEST_F(ImageJobTest, AnImageOutsideTheTeamsAllowListOrMalformedIsRefusedAndNothingQueued) {
  auto narrow = cli({"team", "image-allow", "set", "ml", image("base")});
  ASSERT_EQ(narrow.code, 0) << narrow.describe();
  struct Case {
    std::string image, says;
  };
  for (const Case& c : std::vector<Case>{
           {image("app:1"),
            "not an image team 'ml' may use (it may use images under " + image("base") + ")"},
           {image("base-evil:1"), "not an image team 'ml' may use"},
           {"pytorch:2.3", "the form is"},
           {image("base:1") + "\n", "image"}}) {
    auto r = cliAs(alice_, {"run", "--image", c.image, "--", "true"});
    EXPECT_NE(r.code, 0) << c.image;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.image << ": " << r.describe();
  }
  // Bob's team may use none: the refusal says how an admin allows one.
  auto bobs = cliAs(bob_, {"run", "--image", image("base:1"), "--", "true"});
  EXPECT_NE(bobs.code, 0);
  EXPECT_NE(bobs.err.find("allot team image-allow set cv"), std::string::npos) << bobs.describe();
  EXPECT_TRUE(cliJson(adminToken_, {"job", "list"}).empty());

  // Only a platform admin sets the list; another team's member does not see it.
  auto byMember = cliAs(alice_, {"team", "image-allow", "set", "ml", "evil.example.com/"});
  EXPECT_NE(byMember.code, 0);
  EXPECT_NE(byMember.err.find("only a platform admin"), std::string::npos) << byMember.describe();
  auto byOther = cliAs(bob_, {"team", "image-allow", "show", "ml"});
  EXPECT_NE(byOther.code, 0);
  EXPECT_NE(byOther.err.find("no team 'ml'"), std::string::npos) << byOther.describe();
  auto bad = cli({"team", "image-allow", "set", "ml", "ml/"});
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("must start with a registry"), std::string::npos) << bad.describe();
  auto shown = cliAs(alice_, {"team", "image-allow", "show", "ml"});
  EXPECT_NE(shown.out.find(image("base")), std::string::npos) << shown.describe();
}

TEST_F(ImageJobTest, AnImageNotThereFailsTheJobAndARegistryDownLeavesItPullingUntilBack) {
  const int64_t missing = submit(alice_, {"--image", image("nothing:1")}, {"true"});
  json last;
  ASSERT_TRUE(waitForJobState(alice_, missing, "failed", &last)) << last.dump();
  EXPECT_NE(textOf(last, "reason").find("image not found: " + image("nothing:1")),
            std::string::npos)
      << last.dump();
  EXPECT_TRUE(last["started_at"].is_null()) << last.dump();

  registry_->stop();
  const int64_t waiting =
      submit(alice_, {"--image", image("base:1"), "--gpus", "1"}, {"cat", "/etc/allot-test-image"});
  ASSERT_TRUE(waitFor([&] {
    last = job(alice_, waiting);
    return textOf(last, "reason").find("trying again in") != std::string::npos;
  })) << last.dump();
  EXPECT_EQ(textOf(last, "state"), "pulling");
  EXPECT_TRUE(last["pull"].is_object()) << last.dump();
  EXPECT_EQ(host("h1")["gpus"].size(), 2u);
  registry_->start();
  ASSERT_TRUE(waitForJobState(alice_, waiting, "succeeded", &last)) << last.dump();
  EXPECT_NE(logs(alice_, waiting).find("base"), std::string::npos);
}

// An image that declares NVIDIA_REQUIRE_CUDA above every driver here (99.0; the simulated hosts
// have 12.4): the agent does not start it on GPUs, allotd requeues it with that minimum, and once
// the host reports the image a new job knows it at submission. Work without GPUs runs in it.
TEST_F(ImageJobTest, AnImagesRequiredCudaKeepsItOffOlderDriversAndIsExplained) {
  const int64_t gpuJob = submit(alice_, {"--image", image("cuda:1"), "--gpus", "1"}, {"true"});
  json last;
  ASSERT_TRUE(waitFor([&] {
    last = job(alice_, gpuJob);
    return textOf(last, "state") == "queued" && textOf(last, "image_min_cuda") == "99.0";
  })) << last.dump();
  EXPECT_EQ(textOf(last, "min_cuda"), "99.0") << last.dump();
  EXPECT_TRUE(last["started_at"].is_null()) << last.dump();
  auto shown = cliAs(alice_, {"job", "show", std::to_string(gpuJob)});
  EXPECT_NE(shown.out.find("CUDA 99.0 (its NVIDIA_REQUIRE_CUDA)"), std::string::npos) << shown.out;
  auto explained = cliAs(alice_, {"job", "explain", std::to_string(gpuJob)});
  EXPECT_NE(explained.out.find("needs CUDA 99.0 (NVIDIA_REQUIRE_CUDA)"), std::string::npos)
      << explained.out;
  // Its GPU went back: the host's two are free for other work.
  const int64_t plain = submit(alice_, {"--gpus", "2"}, {"true"});
  ASSERT_TRUE(waitForJobState(alice_, plain, "succeeded", &last)) << last.dump();

  // Known now from h1's cache: a second job is refused at submission, naming min_cuda.
  ASSERT_TRUE(waitFor([&] {
    auto r = cliAs(alice_, {"run", "--image", image("cuda:1"), "--gpus", "1", "--", "true"});
    return r.code != 0 && r.err.find("CUDA 99.0") != std::string::npos;
  }));
  // Without GPUs the toolkit's rule does not apply: it runs, and sees the variable.
  const int64_t cpuJob =
      submit(alice_, {"--image", image("cuda:1")}, {"sh", "-c", "echo $NVIDIA_REQUIRE_CUDA"});
  ASSERT_TRUE(waitForJobState(alice_, cpuJob, "succeeded", &last)) << last.dump();
  EXPECT_NE(logs(alice_, cpuJob).find("cuda>=99.0"), std::string::npos);
  cliAs(alice_, {"job", "cancel", std::to_string(gpuJob)});
}

// An agent whose image cache may take 1 KiB: every pull makes room by removing the least
// recently used images, but never one a running job's container uses.
class ImageBudgetTest : public ImageJobTest {
 protected:
  std::vector<std::string> agentFlags() const override {
    auto flags = ImageJobTest::agentFlags();
    flags.insert(flags.end(), {"--image-budget", "1K"});
    return flags;
  }
  // The references the agent's image store holds now.
  std::set<std::string> cached() {
    std::set<std::string> refs;
    std::error_code ec;
    for (auto it = fs::directory_iterator(path("agents/h1/images/images"), ec);
         !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (it->path().extension() != ".json") continue;
      refs.insert(textOf(json::parse(readFile(it->path().string())), "ref"));
    }
    return refs;
  }
};

TEST_F(ImageBudgetTest, APullMakesRoomButNeverTakesTheImageARunningJobUses) {
  // Holds its image until cancelled, then reads a file of it: its layer is still there.
  const int64_t holder =
      submit(alice_, {"--image", image("base:1")},
             {"sh", "-c",
              "trap 'cat /etc/allot-test-image; exit 0' TERM; while true; do sleep "
              "0.1; done"});
  ASSERT_TRUE(waitForJobState(alice_, holder, "running"));
  const int64_t app = submit(alice_, {"--image", image("app:1")}, {"cat", "/etc/allot-app"});
  json last;
  ASSERT_TRUE(waitForJobState(alice_, app, "succeeded", &last)) << last.dump();
  EXPECT_EQ(cached(), (std::set<std::string>{image("base:1"), image("app:1")}))
      << "over budget, but base:1 runs";

  ASSERT_EQ(cliAs(alice_, {"job", "cancel", std::to_string(holder)}).code, 0);
  ASSERT_TRUE(waitForJobState(alice_, holder, "cancelled", &last)) << last.dump();
  EXPECT_EQ(logs(alice_, holder), "base\n");

  // The next pull: nothing runs, so both go, least recently used first, and only it stays.
  const std::string digest = textOf(job(alice_, app), "image_digest");
  const std::string pinned = registry_->address() + "/test/app@" + digest;
  const int64_t again = submit(alice_, {"--image", pinned}, {"cat", "/etc/allot-app"});
  ASSERT_TRUE(waitForJobState(alice_, again, "succeeded", &last)) << last.dump();
  EXPECT_EQ(logs(alice_, again), "app\n");
  EXPECT_EQ(cached(), std::set<std::string>{pinned});
}

// The cache through allotd and the CLI: what a host holds, a prepull, a prune; who may.
class ImageCacheTest : public ImageJobTest {
 protected:
  json cacheOf(const std::string& host) {
    auto r = httpRequest(port_, "GET", "/api/v1/hosts/" + host + "/images", "", adminToken_);
    if (r.status != 200) throw std::runtime_error("images of " + host + ": " + r.body);
    return r.parsed();
  }
  // Waits until the host's report satisfies `pred`; fails the test with the last one otherwise.
  bool cacheBecomes(const std::function<bool(const json&)>& pred, json* last) {
    return waitFor([&] {
      *last = cacheOf("h1");
      return pred(*last);
    });
  }
  static std::set<std::string> refsIn(const json& cache) {
    std::set<std::string> out;
    for (const auto& i : cache["images"]) out.insert(textOf(i, "ref"));
    return out;
  }
};

TEST_F(ImageCacheTest, AdminsListPrepullAndPruneAHostsCacheAndMembersMayNot) {
  const int64_t id = submit(alice_, {"--image", image("base:1")}, {"true"});
  json last;
  ASSERT_TRUE(waitForJobState(alice_, id, "succeeded", &last)) << last.dump();
  // The host reports its cache on its own clock: a report may still show the finished job's
  // image in use, so wait for one made after the job let go of it.
  ASSERT_TRUE(cacheBecomes(
      [](const json& c) { return refsIn(c).size() == 1 && c["images"][0]["in_use"] == false; },
      &last))
      << last.dump();
  EXPECT_EQ(refsIn(last), std::set<std::string>{image("base:1")});
  EXPECT_GT(last["disk_bytes"].get<int64_t>(), 0) << last.dump();
  auto listed = cli({"image", "list", "--host", "h1"});
  ASSERT_EQ(listed.code, 0) << listed.describe();
  EXPECT_NE(listed.out.find(image("base:1")), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("no budget"), std::string::npos) << listed.out;

  // A shared host caches any team's images: its members are refused, naming why.
  auto member = cliAs(alice_, {"image", "list", "--host", "h1"});
  EXPECT_NE(member.code, 0) << member.describe();
  EXPECT_NE(member.err.find("only platform admins"), std::string::npos) << member.err;
  EXPECT_EQ(httpRequest(port_, "POST", "/api/v1/hosts/h1/images/prune", "{}", alice_).status, 403);
  EXPECT_EQ(httpRequest(port_, "POST", "/api/v1/images/prepull",
                        json({{"image", image("app:1")}, {"hosts", {"h1"}}}).dump(), bob_)
                .status,
            403);

  // A prepull: the image arrives with no job, and the request is retired.
  auto asked = cli({"image", "prepull", image("app:1"), "--host", "h1"});
  ASSERT_EQ(asked.code, 0) << asked.describe();
  EXPECT_NE(asked.out.find("Asked h1 to fetch " + image("app:1")), std::string::npos) << asked.out;
  ASSERT_TRUE(cacheBecomes(
      [](const json& c) { return refsIn(c).size() == 2 && c["prepulls"].empty(); }, &last))
      << last.dump();
  EXPECT_TRUE(host("h1")["images"] == true);
  // One that is not there fails, and is retired too.
  ASSERT_EQ(cli({"image", "prepull", image("missing:1"), "--pool", "shared"}).code, 0);
  ASSERT_TRUE(cacheBecomes([](const json& c) { return c["prepulls"].empty(); }, &last))
      << last.dump();
  EXPECT_EQ(refsIn(last).size(), 2u);

  // A prune: nothing runs, so both go.
  auto pruned = cli({"image", "prune", "--host", "h1"});
  ASSERT_EQ(pruned.code, 0) << pruned.describe();
  ASSERT_TRUE(cacheBecomes(
      [](const json& c) {
        return c["images"].empty() && c["prunes"]["done"] == 1 && c["prunes"]["asked"] == 1;
      },
      &last))
      << last.dump();
  EXPECT_EQ(last["disk_bytes"], 0) << last.dump();
  // Asked once, done once: an agent restart does not prune again, and the requests outlive an
  // allotd restart.
  restartServer();
  EXPECT_EQ(cacheOf("h1")["prunes"]["asked"], 1);

  // Bad requests name what is wrong and change nothing.
  auto bad = httpRequest(port_, "POST", "/api/v1/images/prepull",
                         json({{"image", "not a ref"}, {"hosts", {"h1"}}}).dump(), adminToken_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("image"), std::string::npos) << bad.body;
  auto neither = cli({"image", "prepull", image("app:1")});
  EXPECT_NE(neither.code, 0) << neither.describe();
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/hosts/nope/images", "", adminToken_).status, 404);
  EXPECT_EQ(httpRequest(port_, "POST", "/api/v1/images/prepull",
                        json({{"image", image("app:1")}, {"pool", "shared"}, {"x", 1}}).dump(),
                        adminToken_)
                .status,
            400);
}

}  // namespace
}  // namespace allot::it
