// The image cache's messages: allotd's commands in the desired state and the agent's report, both
// ways, and reports out of bounds refused naming the field.

#include "model/image_cache.h"

#include <gtest/gtest.h>

#include "model/agent_protocol.h"

namespace allot::model {
namespace {

using nlohmann::json;

TEST(ImageCacheTest, CommandsRideInTheDesiredStateOnlyWhenThereAreAny) {
  json plain = json::parse(encodeDesired({}, 5000));
  EXPECT_FALSE(plain.contains("images"));
  auto none = decodeDesired(plain);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->images.empty());

  json asked = json::parse(encodeDesired({}, 5000, std::nullopt, {2, {"r:5000/a:1"}}));
  auto decoded = decodeDesired(asked);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->images.prunes, 2);
  EXPECT_EQ(decoded->images.prepulls, std::vector<std::string>{"r:5000/a:1"});

  asked["images"]["prunes"] = -1;
  EXPECT_FALSE(decodeDesired(asked).ok());
  asked["images"] = {{"prepulls", json::array({7})}};
  EXPECT_FALSE(decodeDesired(asked).ok());
}

TEST(ImageCacheTest, APrepullsLoginRidesWithItAndOnlyWithAPrepull) {
  ImageCommands c{0, {"r:5000/ml/a:1", "r:5000/pub/b:1"}, {}};
  c.prepullLogins["r:5000/ml/a:1"] = {"r:5000", "ml-puller", "pw"};
  json asked = json::parse(encodeDesired({}, 5000, std::nullopt, c));
  auto decoded = decodeDesired(asked);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ASSERT_EQ(decoded->images.prepullLogins.size(), 1u);
  const RegistryAuth& a = decoded->images.prepullLogins.at("r:5000/ml/a:1");
  EXPECT_EQ(a.registry, "r:5000");
  EXPECT_EQ(a.username, "ml-puller");
  EXPECT_EQ(a.password, "pw");
  // Without logins the message is the one older agents read.
  c.prepullLogins.clear();
  EXPECT_FALSE(
      json::parse(encodeDesired({}, 5000, std::nullopt, c))["images"].contains("prepull_logins"));
  // A login for a reference that is not a prepull, or missing a part, is refused.
  json stray = asked;
  stray["images"]["prepull_logins"]["r:5000/other:1"] =
      stray["images"]["prepull_logins"]["r:5000/ml/a:1"];
  EXPECT_FALSE(decodeDesired(stray).ok());
  json partial = asked;
  partial["images"]["prepull_logins"]["r:5000/ml/a:1"].erase("password");
  EXPECT_FALSE(decodeDesired(partial).ok());
  json notObject = asked;
  notObject["images"]["prepull_logins"] = json::array();
  EXPECT_FALSE(decodeDesired(notObject).ok());
}

TEST(ImageCacheTest, AReportRoundTripsAndOneOutOfBoundsIsRefusedNamingTheField) {
  ImageReport r;
  r.images.push_back({"r:5000/a:1", "sha256:" + std::string(64, 'a'), 123, 456, true});
  r.diskBytes = 789;
  r.budgetBytes = 1000;
  r.prunesDone = 3;
  r.prepulls.push_back({"r:5000/b:1", false, "slow", 1, 2});
  auto back = imageReportFromJson(json::parse(encodeImageReport(r)));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->images.size(), 1u);
  EXPECT_EQ(back->images[0].ref, "r:5000/a:1");
  EXPECT_EQ(back->images[0].bytes, 123);
  EXPECT_EQ(back->images[0].lastUsedMs, 456);
  EXPECT_TRUE(back->images[0].inUse);
  EXPECT_EQ(back->diskBytes, 789);
  EXPECT_EQ(back->budgetBytes, 1000);
  EXPECT_EQ(back->prunesDone, 3);
  ASSERT_EQ(back->prepulls.size(), 1u);
  EXPECT_EQ(back->prepulls[0].message, "slow");
  EXPECT_EQ(back->prepulls[0].total, 2);

  json msg = json::parse(encodeImageReport(r));
  auto refused = [&](json bad, const std::string& field) {
    auto res = imageReportFromJson(bad);
    ASSERT_FALSE(res.ok()) << bad.dump();
    EXPECT_NE(res.status().message().find(field), std::string::npos) << res.status().message();
  };
  json bad = msg;
  bad["images"][0]["ref"] = std::string(kMaxImageText + 1, 'x');
  refused(bad, "ref");
  bad = msg;
  bad["disk_bytes"] = -5;
  refused(bad, "disk_bytes");
  bad = msg;
  bad["images"] = json::array();
  for (size_t i = 0; i <= kMaxReportedImages; ++i) bad["images"].push_back(msg["images"][0]);
  refused(bad, "images");
  bad = msg;
  bad["prepulls"][0]["failed"] = "yes";
  refused(bad, "image report");
  EXPECT_FALSE(imageReportFromJson(json{{"type", "status"}}).ok());
  // Found by fuzz/wire_fuzz.cc: a type that is not a string threw out of the decoder.
  EXPECT_FALSE(imageReportFromJson(json{{"type", 54}}).ok());
  EXPECT_FALSE(imageReportFromJson(json::array({"images"})).ok());
}

}  // namespace
}  // namespace allot::model
