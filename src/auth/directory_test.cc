#include "auth/directory.h"

#include <gtest/gtest.h>

namespace allot::auth {
namespace {

TEST(DirectoryTest, FilterValuesAreEscapedPerRfc4515) {
  EXPECT_EQ(escapeFilterValue("alice"), "alice");
  EXPECT_EQ(escapeFilterValue("*"), "\\2a");
  EXPECT_EQ(escapeFilterValue("a)(uid=*"), "a\\29\\28uid=\\2a");
  EXPECT_EQ(escapeFilterValue("back\\slash"), "back\\5cslash");
  EXPECT_EQ(escapeFilterValue(std::string("nul\0", 4)), "nul\\00");
  EXPECT_EQ(buildFilter("(&(objectClass=posixAccount)(uid={user}))", "*)(uid=admin", ""),
            "(&(objectClass=posixAccount)(uid=\\2a\\29\\28uid=admin))");
  EXPECT_EQ(buildFilter("(member={dn})", "x", "uid=a(b),dc=x"), "(member=uid=a\\28b\\29,dc=x)");
}

// Attack: a placeholder inside the value typed. Filled in one pass, "al{dn}ice" is looked up as
// itself, not as alice with an empty {dn}, so it cannot try alice's password under a name of its
// own and around the failure limit kept for "alice".
TEST(DirectoryTest, APlaceholderInAUserNameIsNotFilledIn) {
  EXPECT_EQ(buildFilter("(uid={user})", "al{dn}ice", ""), "(uid=al{dn}ice)");
  EXPECT_EQ(buildFilter("(|(uid={user})(member={dn}))", "{user}", "cn={user}"),
            "(|(uid={user})(member=cn={user}))");
}

LdapConfig mappedConfig() {
  LdapConfig c;
  c.groups["ml-users"] = {{"ml", model::Role::kMember}};
  c.groups["ml-leads"] = {{"ml", model::Role::kTeamAdmin}};
  c.groups["cn=auditors,ou=groups,dc=example,dc=org"] = {{"ml", model::Role::kViewer},
                                                         {"cv", model::Role::kViewer}};
  c.platformAdminGroups = {"allot-admins"};
  return c;
}

TEST(DirectoryTest, GroupsMapToTeamsHighestRoleWins) {
  DirectoryUser u;
  u.name = "alice";
  u.groups = {"ML-Users", "ml-leads", "CN=Auditors,ou=groups,dc=example,dc=org", "other"};
  auto access = mapGroups(mappedConfig(), u);
  ASSERT_TRUE(access.ok()) << access.status().toString();
  EXPECT_EQ(access->teams.at("ml"), model::Role::kTeamAdmin);
  EXPECT_EQ(access->teams.at("cv"), model::Role::kViewer);
  EXPECT_FALSE(access->platformAdmin);
}

TEST(DirectoryTest, AdminGroupAloneGrantsAccess) {
  DirectoryUser u{"root", "", {"allot-admins"}};
  auto access = mapGroups(mappedConfig(), u);
  ASSERT_TRUE(access.ok());
  EXPECT_TRUE(access->platformAdmin);
  EXPECT_TRUE(access->teams.empty());
}

TEST(DirectoryTest, NoMappedGroupIsRefusedClearly) {
  DirectoryUser u{"carol", "", {"staff"}};
  auto access = mapGroups(mappedConfig(), u);
  ASSERT_FALSE(access.ok());
  EXPECT_EQ(access.status().code(), Code::kPermissionDenied);
  EXPECT_NE(access.status().message().find("no directory group"), std::string::npos);
}

TEST(DirectoryTest, ParsesTeamRole) {
  auto tr = parseTeamRole("ml:team-admin");
  ASSERT_TRUE(tr.ok());
  EXPECT_EQ(tr->team, "ml");
  EXPECT_EQ(tr->role, model::Role::kTeamAdmin);
  EXPECT_FALSE(parseTeamRole("ml").ok());
  EXPECT_FALSE(parseTeamRole("ml:platform-admin").ok());
  EXPECT_FALSE(parseTeamRole(":member").ok());
}

}  // namespace
}  // namespace allot::auth
