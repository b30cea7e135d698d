// The image cache service against a World the test fills: who may see and run which host's
// cache, what a prune and a prepull record on the host (durably, and for its agent), and how an
// agent's report retires the prepulls it shows done. The whole path, through a real agent, is
// tests/integration/image_test.cc (ImageCacheTest).

#include "control/images/image_cache_service.h"

#include <gtest/gtest.h>

#include "control/testsupport/changes.h"
#include "control/testsupport/principals.h"

namespace allot::control {
namespace {

class ImageCacheServiceTest : public ::testing::Test {
 protected:
  ImageCacheServiceTest() {
    for (const char* team : {"vision", "nlp"}) world_.teams[team].name = team;
    world_.teams["vision"].imageAllow = {"r:5000/vision/"};
    addHost("shared-1", "");
    addHost("shared-2", "");
    addHost("vision-1", "vision");
    addHost("nlp-1", "nlp");
    addHost("old", "");
    world_.hosts.at("old").images = false;  // its agent runs no images
  }
  void addHost(const std::string& name, const std::string& team) {
    model::Host& h = world_.hosts[name];
    h.name = name;
    h.dedicatedTo = team;
    h.images = true;
  }

  FakeClock clock_;
  World world_;
  ImageCacheService cache_{clock_, world_};
  Principal admin_ = testsupport::platformAdmin();
  Principal lead_ = testsupport::userIn("lead", "vision", model::Role::kTeamAdmin);
  Principal alice_ = testsupport::userIn("alice", "vision", model::Role::kMember);
};

TEST_F(ImageCacheServiceTest, ASharedHostsCacheIsTheAdminsADedicatedOnesIsItsTeams) {
  EXPECT_TRUE(cache_.hostImages(admin_, "shared-1").ok());
  // Any team's images may be on a shared host: its members see the host, not what it caches.
  EXPECT_EQ(cache_.hostImages(alice_, "shared-1").status().code(), Code::kPermissionDenied);
  EXPECT_TRUE(cache_.hostImages(alice_, "vision-1").ok());
  // Another team's host is not there for them.
  EXPECT_EQ(cache_.hostImages(alice_, "nlp-1").status().code(), Code::kNotFound);
  EXPECT_EQ(cache_.prune(lead_, "nlp-1").status().code(), Code::kNotFound);
  EXPECT_EQ(cache_.hostImages(admin_, "nope").status().code(), Code::kNotFound);
  // Running it: the team's team-admins, not its members; never a shared host.
  EXPECT_EQ(cache_.prune(alice_, "vision-1").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(cache_.prune(lead_, "shared-1").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(world_.hosts.at("shared-1").imagePrunes, 0);
}

TEST_F(ImageCacheServiceTest, APruneIsCountedOnTheHostAndPushedToItsAgent) {
  auto pruned = cache_.prune(lead_, "vision-1");
  ASSERT_TRUE(pruned.ok()) << pruned.status().toString();
  EXPECT_EQ(world_.hosts.at("vision-1").imagePrunes, 1);
  ASSERT_NE(findOp<store::PutHost>(*pruned), nullptr) << "the request must be durable";
  EXPECT_EQ(findOp<store::PutHost>(*pruned)->host.imagePrunes, 1);
  EXPECT_EQ(pruned->pushHosts, std::set<std::string>{"vision-1"});
  EXPECT_EQ(pruned->value.prunesAsked, 1);
  EXPECT_EQ(cache_.prune(admin_, "old").status().code(), Code::kFailedPrecondition);
}

TEST_F(ImageCacheServiceTest, APrepullGoesToTheHostsNamedOrThePoolsAndPassesTheTeamsAllowList) {
  auto pool = cache_.prepull(admin_, "r:5000/base/cuda:12", {}, "shared");
  ASSERT_TRUE(pool.ok()) << pool.status().toString();
  EXPECT_EQ(pool->value, (std::vector<std::string>{"shared-1", "shared-2"})) << "not old";
  EXPECT_EQ(world_.hosts.at("shared-1").imagePrepulls,
            std::vector<std::string>{"r:5000/base/cuda:12"});
  // Asked again: once.
  ASSERT_TRUE(cache_.prepull(admin_, "r:5000/base/cuda:12", {"shared-1"}, "").ok());
  EXPECT_EQ(world_.hosts.at("shared-1").imagePrepulls.size(), 1u);

  // A team-admin: their team's hosts, and images their team may use.
  auto mine = cache_.prepull(lead_, "r:5000/vision/train", {}, "vision");
  ASSERT_TRUE(mine.ok()) << mine.status().toString();
  EXPECT_EQ(world_.hosts.at("vision-1").imagePrepulls,
            std::vector<std::string>{"r:5000/vision/train:latest"});
  auto outside = cache_.prepull(lead_, "r:5000/other/x:1", {"vision-1"}, "");
  EXPECT_EQ(outside.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(outside.status().field(), "image");
  EXPECT_EQ(cache_.prepull(lead_, "r:5000/vision/x:1", {}, "shared").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(cache_.prepull(lead_, "r:5000/vision/x:1", {}, "nlp").status().code(), Code::kNotFound);

  // Bad requests name their field and change nothing.
  EXPECT_EQ(cache_.prepull(admin_, "cuda:12", {}, "shared").status().field(), "image");
  EXPECT_EQ(cache_.prepull(admin_, "r:5000/x:1", {}, "").status().field(), "hosts");
  EXPECT_EQ(cache_.prepull(admin_, "r:5000/x:1", {"shared-1"}, "shared").status().field(), "pool");
  EXPECT_EQ(cache_.prepull(admin_, "r:5000/x:1", {"nope"}, "").status().code(), Code::kNotFound);
  EXPECT_EQ(cache_.prepull(admin_, "r:5000/x:1", {"old"}, "").status().code(),
            Code::kFailedPrecondition);
  EXPECT_EQ(cache_.prepull(admin_, "r:5000/x:1", {}, "no-such-team").status().field(), "pool");
  EXPECT_EQ(world_.hosts.at("shared-2").imagePrepulls.size(), 1u);
}

TEST_F(ImageCacheServiceTest, APrepullPullsWithTheTeamNamedOrThePoolsTeam) {
  // By default, the team of the host's pool; none on a shared host.
  ASSERT_TRUE(cache_.prepull(lead_, "r:5000/vision/a:1", {"vision-1"}, "").ok());
  EXPECT_EQ(ImageCacheService::prepullTeam(world_.hosts.at("vision-1"), "r:5000/vision/a:1"),
            "vision");
  ASSERT_TRUE(cache_.prepull(admin_, "r:5000/vision/a:1", {"shared-1"}, "").ok());
  EXPECT_EQ(ImageCacheService::prepullTeam(world_.hosts.at("shared-1"), "r:5000/vision/a:1"), "");
  // Named: kept with the host (durably), and the latest one asked wins.
  auto named = cache_.prepull(admin_, "r:5000/vision/a:1", {"shared-1"}, "", "vision");
  ASSERT_TRUE(named.ok()) << named.status().message();
  ASSERT_NE(findOp<store::PutHost>(*named), nullptr);
  EXPECT_EQ(named->pushHosts, std::set<std::string>{"shared-1"});
  EXPECT_EQ(ImageCacheService::prepullTeam(world_.hosts.at("shared-1"), "r:5000/vision/a:1"),
            "vision");
  EXPECT_EQ(world_.hosts.at("shared-1").imagePrepulls.size(), 1u);
  // The team's image allow-list holds for everyone who names it; a team the caller cannot see,
  // or none, is 404 naming `team`.
  auto outside = cache_.prepull(admin_, "r:5000/other/x:1", {"shared-1"}, "", "vision");
  EXPECT_EQ(outside.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(outside.status().field(), "image");
  auto other = cache_.prepull(lead_, "r:5000/vision/a:1", {"vision-1"}, "", "nlp");
  EXPECT_EQ(other.status().code(), Code::kNotFound);
  EXPECT_EQ(other.status().field(), "team");
  EXPECT_EQ(cache_.prepull(admin_, "r:5000/vision/a:1", {"shared-1"}, "", "ghost").status().field(),
            "team");
  // A team's login goes only where its jobs would take it: never to another team's dedicated
  // host (whose team may hold it as root), and it is lent only by those who may submit its work.
  world_.teams["nlp"].imageAllow = {"r:5000/vision/"};
  auto elsewhere = cache_.prepull(admin_, "r:5000/vision/a:1", {"nlp-1"}, "", "vision");
  EXPECT_EQ(elsewhere.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(elsewhere.status().field(), "team");
  Principal both = testsupport::userIn("both", "nlp", model::Role::kTeamAdmin);
  both.teams["vision"] = model::Role::kViewer;
  auto lent = cache_.prepull(both, "r:5000/vision/a:1", {"nlp-1"}, "", "vision");
  EXPECT_EQ(lent.status().code(), Code::kPermissionDenied);
  both.teams["vision"] = model::Role::kMember;
  EXPECT_EQ(cache_.prepull(both, "r:5000/vision/a:1", {"nlp-1"}, "", "vision").status().field(),
            "team");
  EXPECT_TRUE(world_.hosts.at("nlp-1").imagePrepulls.empty());
  // A host handed to another team since the prepull was asked: its login no longer goes there.
  world_.hosts.at("shared-1").dedicatedTo = "nlp";
  EXPECT_EQ(ImageCacheService::prepullTeam(world_.hosts.at("shared-1"), "r:5000/vision/a:1"), "");
  world_.hosts.at("shared-1").dedicatedTo = "";
  // Done: the team goes with the prepull.
  model::ImageReport report;
  report.images.push_back({"r:5000/vision/a:1", "sha256:" + std::string(64, 'a'), 1, 1, false});
  cache_.agentReport("shared-1", report);
  EXPECT_TRUE(world_.hosts.at("shared-1").imagePrepullTeams.empty());
  EXPECT_TRUE(world_.hosts.at("shared-1").imagePrepulls.empty());
}

TEST_F(ImageCacheServiceTest, AnAgentsReportRetiresThePrepullsItShowsDone) {
  for (const char* ref : {"r:5000/a:1", "r:5000/b:1", "r:5000/c:1"})
    ASSERT_TRUE(cache_.prepull(admin_, ref, {"shared-1"}, "").ok());
  model::ImageReport report;
  report.images.push_back({"r:5000/a:1", "sha256:" + std::string(64, 'a'), 100, 5, false});
  report.prepulls.push_back({"r:5000/b:1", true, "image not found: r:5000/b:1", 0, 0});
  report.prepulls.push_back({"r:5000/c:1", false, "", 10, 100});
  report.diskBytes = 4096;
  auto c = cache_.agentReport("shared-1", report);
  EXPECT_EQ(world_.hosts.at("shared-1").imagePrepulls, std::vector<std::string>{"r:5000/c:1"});
  ASSERT_NE(findOp<store::PutHost>(c), nullptr);
  EXPECT_EQ(c.pushHosts, std::set<std::string>{"shared-1"});
  auto seen = cache_.hostImages(admin_, "shared-1");
  ASSERT_TRUE(seen.ok());
  ASSERT_TRUE(seen->report.has_value());
  EXPECT_EQ(seen->report->diskBytes, 4096);
  EXPECT_EQ(seen->report->images.size(), 1u);
  // The same report again changes nothing durable.
  EXPECT_EQ(findOp<store::PutHost>(cache_.agentReport("shared-1", report)), nullptr);
}

}  // namespace
}  // namespace allot::control
