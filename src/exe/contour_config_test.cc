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

// The contours in order, the default one, and who may submit to each.
void expectContours(const control::ContourOptions& c, const std::string& names,
                    const std::string& defaultContour,
                    const std::vector<std::pair<std::string, model::Role>>& submitRoles) {
  EXPECT_EQ(c.namesText(), names);
  EXPECT_EQ(c.defaultContour, defaultContour);
  for (const auto& [name, role] : submitRoles) {
    const control::ContourRule* rule = c.find(name);
    ASSERT_NE(rule, nullptr) << name;
    EXPECT_EQ(rule->submitRole, role) << name;
  }
}

TEST(ContourConfig, DefaultsAreDevTestProdWithProdForTeamAdmins) {
  auto c = read("");
  ASSERT_TRUE(c.ok()) << c.status().message();
  expectContours(*c, "dev, test, prod", "dev",
                 {{"dev", model::Role::kMember},
                  {"test", model::Role::kMember},
                  {"prod", model::Role::kTeamAdmin}});
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
  expectContours(*c, "sandbox, staging, prod", "sandbox",
                 {{"sandbox", model::Role::kMember},
                  {"staging", model::Role::kTeamAdmin},
                  {"prod", model::Role::kTeamAdmin}});
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
