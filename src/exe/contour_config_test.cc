#include "exe/contour_config.h"

#include <gtest/gtest.h>

namespace allot {
namespace {

Result<control::ContourOptions> read(std::string_view text) {
  control::ContourOptions out;
  auto tbl = toml::parse(text);
  Status st = readContourConfig(tbl, out);
  if (!st.ok()) return st;
  return out;
}

TEST(ContourConfig, DefaultsAreDevTestProdWithProdForTeamAdmins) {
  auto c = read("");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->namesText(), "dev, test, prod");
  EXPECT_EQ(c->defaultContour, "dev");
  EXPECT_EQ(c->find("dev")->submitRole, model::Role::kMember);
  EXPECT_EQ(c->find("test")->submitRole, model::Role::kMember);
  EXPECT_EQ(c->find("prod")->submitRole, model::Role::kTeamAdmin);
}

TEST(ContourConfig, NamesDefaultAndRolesAreConfigurable) {
  auto c = read(R"(
[contours]
names = ["sandbox", "staging", "prod"]
default = "sandbox"
[contours.submit_role]
staging = "team-admin"
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->namesText(), "sandbox, staging, prod");
  EXPECT_EQ(c->defaultContour, "sandbox");
  EXPECT_EQ(c->find("sandbox")->submitRole, model::Role::kMember);
  EXPECT_EQ(c->find("staging")->submitRole, model::Role::kTeamAdmin);
  EXPECT_EQ(c->find("prod")->submitRole, model::Role::kTeamAdmin);
  EXPECT_EQ(c->find("dev"), nullptr);
}

TEST(ContourConfig, BadConfigsNameTheKey) {
  auto message = [](std::string_view text) {
    auto c = read(text);
    return c.ok() ? std::string("ok") : c.status().message();
  };
  EXPECT_NE(message("[contours]\nnames = []\n").find("contours.names"), std::string::npos);
  EXPECT_NE(message("[contours]\nnames = [\"dev\", \"dev\"]\n").find("appears twice"),
            std::string::npos);
  EXPECT_NE(message("[contours]\nnames = [\"Prod!\"]\n").find("contours.names"), std::string::npos);
  EXPECT_NE(message("[contours]\nnames = [\"a\", \"b\"]\n").find("contours.default: 'dev'"),
            std::string::npos);
  EXPECT_NE(message("[contours]\ndefault = \"qa\"\n").find("contours.default"), std::string::npos);
  EXPECT_NE(message("[contours.submit_role]\nprod = \"boss\"\n").find("contours.submit_role.prod"),
            std::string::npos);
  EXPECT_NE(message("[contours.submit_role]\nqa = \"member\"\n").find("no contour 'qa'"),
            std::string::npos);
  EXPECT_NE(message("[contours]\nnmaes = [\"dev\"]\n").find("contours.nmaes: unknown key"),
            std::string::npos);
}

}  // namespace
}  // namespace allot
