// Directory logins against a real slapd that each test starts on 127.0.0.1 (an OS-chosen free
// port) with its own database in a temp dir: users (posixAccount) and groups (groupOfNames)
// map to teams and roles at each login (docs/login.md).

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "harness.h"

namespace allot::it {
namespace {

constexpr const char* kSuffix = "dc=example,dc=org";
constexpr const char* kAdminDn = "cn=admin,dc=example,dc=org";
constexpr const char* kAdminPassword = "slapd-admin-secret";

uint16_t freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string person(const std::string& uid, int number, const std::string& password) {
  return "dn: uid=" + uid + ",ou=people," + kSuffix +
         "\n"
         "objectClass: inetOrgPerson\nobjectClass: posixAccount\n"
         "uid: " +
         uid + "\ncn: " + uid + "\nsn: " + uid +
         "\n"
         "uidNumber: " +
         std::to_string(number) + "\ngidNumber: " + std::to_string(number + 1000) +
         "\nhomeDirectory: /home/" + uid + "\nuserPassword: " + password + "\n\n";
}

std::string group(const std::string& cn, const std::vector<std::string>& members) {
  std::string out =
      "dn: cn=" + cn + ",ou=groups," + kSuffix + "\nobjectClass: groupOfNames\ncn: " + cn + "\n";
  for (const auto& m : members) out += "member: uid=" + m + ",ou=people," + kSuffix + "\n";
  return out + "\n";
}

class LdapLoginTest : public TestCluster {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/usr/sbin/slapd"))
      GTEST_SKIP() << "slapd is not installed (apt-get install slapd ldap-utils)";
    char tmpl[] = "/tmp/allot-slapd-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    ldapDir_ = tmpl;
    std::filesystem::create_directories(ldapDir_ + "/db");
    ldapPort_ = freePort();
    ldapUrl_ = "ldap://127.0.0.1:" + std::to_string(ldapPort_);
    writeFile(ldapDir_ + "/slapd.conf",
              "include /etc/ldap/schema/core.schema\n"
              "include /etc/ldap/schema/cosine.schema\n"
              "include /etc/ldap/schema/nis.schema\n"
              "include /etc/ldap/schema/inetorgperson.schema\n"
              "modulepath /usr/lib/ldap\nmoduleload back_mdb\n"
              "pidfile " +
                  ldapDir_ +
                  "/slapd.pid\n"
                  "database mdb\nmaxsize 10485760\n"
                  "suffix \"" +
                  kSuffix + "\"\nrootdn \"" + kAdminDn + "\"\nrootpw " + kAdminPassword +
                  "\ndirectory " + ldapDir_ + "/db\n");
    std::string ldif = std::string("dn: ") + kSuffix +
                       "\nobjectClass: dcObject\nobjectClass: organization\no: example\ndc: "
                       "example\n\n"
                       "dn: ou=people," +
                       kSuffix +
                       "\nobjectClass: organizationalUnit\nou: people\n\n"
                       "dn: ou=groups," +
                       kSuffix + "\nobjectClass: organizationalUnit\nou: groups\n\n";
    ldif += person("alice", 10001, "alice-ldap-pw") + person("dave", 10002, "dave-ldap-pw") +
            person("eve", 10003, "eve-ldap-pw");
    ldif += group("ml-users", {"alice", "eve"}) + group("ml-leads", {"eve"}) +
            group("staff", {"alice", "dave", "eve"});
    writeFile(ldapDir_ + "/data.ldif", ldif);
    auto load = Process::spawn(
        {"/usr/sbin/slapadd", "-f", ldapDir_ + "/slapd.conf", "-l", ldapDir_ + "/data.ldif"},
        ldapDir_ + "/slapadd.out", ldapDir_ + "/slapadd.err", childEnv({}));
    auto loaded = load->waitFor(kTimeout);
    ASSERT_TRUE(loaded.has_value() && *loaded == 0) << load->stderrText();
    // -d 0: stay in the foreground, so the test owns (and kills) the process.
    slapd_ = Process::spawn(
        {"/usr/sbin/slapd", "-f", ldapDir_ + "/slapd.conf", "-h", ldapUrl_ + "/", "-d", "0"},
        ldapDir_ + "/slapd.out", ldapDir_ + "/slapd.err", childEnv({}));
    ASSERT_TRUE(waitFor([&] { return ldapSearchWorks() || !slapd_->running(); }));
    ASSERT_TRUE(slapd_->running()) << slapd_->stderrText();
    TestCluster::SetUp();
  }
  void TearDown() override {
    TestCluster::TearDown();
    slapd_.reset();  // SIGKILL and reap
    if (!ldapDir_.empty()) std::filesystem::remove_all(ldapDir_);
  }

  std::vector<std::string> serverFlags() const override {
    writeFile(path("bind.password"), std::string(kAdminPassword) + "\n");
    writeFile(path("allotd.toml"),
              "[ldap]\n"
              "url = \"" +
                  ldapUrl_ +
                  "\"\n"
                  "bind_dn = \"" +
                  kAdminDn +
                  "\"\n"
                  "bind_password_file = \"" +
                  path("bind.password") +
                  "\"\n"
                  "user_base = \"ou=people," +
                  kSuffix +
                  "\"\n"
                  "user_filter = \"(&(objectClass=posixAccount)(uid={user}))\"\n"
                  "group_base = \"ou=groups," +
                  kSuffix +
                  "\"\n"
                  "group_filter = \"(&(objectClass=groupOfNames)(member={dn}))\"\n"
                  "network_timeout = \"5s\"\n"
                  "timeout = \"10s\"\n"
                  "recheck_interval = \"1s\"\n"
                  "[ldap.groups]\n"
                  "ml-users = \"ml:member\"\n"
                  "ml-leads = \"ml:team-admin\"\n");
    return {"--heartbeat", "1s", "--config", path("allotd.toml")};
  }

  bool ldapSearchWorks() {
    auto p = Process::spawn({"/usr/bin/ldapsearch", "-x", "-H", ldapUrl_, "-D", kAdminDn, "-w",
                             kAdminPassword, "-b", kSuffix, "-s", "base"},
                            ldapDir_ + "/probe.out", ldapDir_ + "/probe.err", childEnv({}));
    auto code = p->waitFor(kTimeout);
    return code && *code == 0;
  }
  void ldapModify(const std::string& ldif) {
    writeFile(ldapDir_ + "/change.ldif", ldif);
    auto p = Process::spawn({"/usr/bin/ldapmodify", "-x", "-H", ldapUrl_, "-D", kAdminDn, "-w",
                             kAdminPassword, "-f", ldapDir_ + "/change.ldif"},
                            ldapDir_ + "/modify.out", ldapDir_ + "/modify.err", childEnv({}));
    auto code = p->waitFor(kTimeout);
    ASSERT_TRUE(code && *code == 0) << p->stderrText();
  }
  HttpResult login(const std::string& user, const std::string& password) {
    json body = {{"user", user}, {"password", password}};
    return httpRequest(port_, "POST", "/api/v1/login", body.dump());
  }
  json user(const std::string& name) {
    return httpRequest(port_, "GET", "/api/v1/users/" + name, "", adminToken_).parsed();
  }

  std::string ldapDir_;
  uint16_t ldapPort_ = 0;
  std::string ldapUrl_;
  std::unique_ptr<Process> slapd_;
};

TEST_F(LdapLoginTest, GroupsMapToTeamsAndFollowTheDirectoryAtEachLogin) {
  createTeam("ml");
  auto first = login("alice", "alice-ldap-pw");
  ASSERT_EQ(first.status, 200) << first.body;
  std::string token = textOf(first.parsed(), "token");
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/whoami", "", token).parsed().value("name", ""),
            "alice");
  json alice = user("alice");
  EXPECT_EQ(alice.value("source", ""), "ldap");
  EXPECT_EQ(alice["teams"].dump(), R"({"ml":"member"})");
  EXPECT_EQ(alice.value("uid", -1), 10001);
  EXPECT_EQ(alice.value("gid", -1), 11001);
  EXPECT_FALSE(alice.value("has_password", true));  // the directory keeps it

  // Promoted in the directory: team-admin at the next login.
  ldapModify(std::string("dn: cn=ml-leads,ou=groups,") + kSuffix +
             "\nchangetype: modify\nadd: member\nmember: uid=alice,ou=people," + kSuffix + "\n");
  ASSERT_EQ(login("alice", "alice-ldap-pw").status, 200);
  EXPECT_EQ(user("alice")["teams"].dump(), R"({"ml":"team-admin"})");

  // Out of every mapped group: refused with a clear message, and the stale role is not used.
  ldapModify(std::string("dn: cn=ml-leads,ou=groups,") + kSuffix +
             "\nchangetype: modify\ndelete: member\nmember: uid=alice,ou=people," + kSuffix +
             "\n\ndn: cn=ml-users,ou=groups," + kSuffix +
             "\nchangetype: modify\ndelete: member\nmember: uid=alice,ou=people," + kSuffix + "\n");
  auto refused = login("alice", "alice-ldap-pw");
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(refused.body.find("no directory group"), std::string::npos) << refused.body;
}

// A user taken out of a group loses what it granted while their tokens live, not at their next
// login: before, eve kept team-admin of ml through the token she had, however long it lasted.
// allotd reads the groups of directory users holding tokens again every recheck_interval (1s
// here); out of every mapped group, the user's teams and tokens end.
TEST_F(LdapLoginTest, ATokenGrantsNoMoreThanTheDirectoryDoesNow) {
  createTeam("ml");
  auto eve = login("eve", "eve-ldap-pw");
  ASSERT_EQ(eve.status, 200) << eve.body;
  const std::string token = textOf(eve.parsed(), "token");
  auto alice = login("alice", "alice-ldap-pw");
  ASSERT_EQ(alice.status, 200) << alice.body;
  const std::string aliceToken = textOf(alice.parsed(), "token");
  ASSERT_EQ(user("eve")["teams"].dump(), R"({"ml":"team-admin"})");
  auto member = [](const std::string& who) {
    return std::string("\nchangetype: modify\ndelete: member\nmember: uid=") + who + ",ou=people," +
           kSuffix + "\n";
  };
  // eve is ml-leads' only member, which a groupOfNames must have: dave takes her place.
  ldapModify(std::string("dn: cn=ml-leads,ou=groups,") + kSuffix +
             "\nchangetype: modify\nreplace: member\nmember: uid=dave,ou=people," + kSuffix + "\n");
  EXPECT_TRUE(waitFor([&] { return user("eve")["teams"].dump() == R"({"ml":"member"})"; }))
      << user("eve").dump();
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/whoami", "", token).status, 200)
      << "still in ml-users: a member now";
  ldapModify(std::string("dn: cn=ml-users,ou=groups,") + kSuffix + member("eve"));
  EXPECT_TRUE(waitFor(
      [&] { return httpRequest(port_, "GET", "/api/v1/whoami", "", token).status == 401; }));
  EXPECT_EQ(user("eve")["teams"].dump(), "{}");
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/whoami", "", aliceToken).status, 200)
      << "others are left as they are";
  EXPECT_EQ(user("alice")["teams"].dump(), R"({"ml":"member"})");
}

TEST_F(LdapLoginTest, WrongPasswordsUnknownUsersAndUnmappedUsersAreRefused) {
  createTeam("ml");
  EXPECT_EQ(login("alice", "not-alices-pw").status, 401);
  EXPECT_EQ(login("alice", "").status, 401);  // an unauthenticated bind must not pass
  EXPECT_EQ(login("zed", "whatever-pw").status, 401);
  auto dave = login("dave", "dave-ldap-pw");  // only in "staff", which maps to nothing
  EXPECT_EQ(dave.status, 403) << dave.body;
  EXPECT_NE(dave.body.find("no directory group"), std::string::npos);
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/users/dave", "", adminToken_).status, 404);
  // Team-admin through ml-leads (highest of the two groups).
  ASSERT_EQ(login("eve", "eve-ldap-pw").status, 200);
  EXPECT_EQ(user("eve")["teams"].dump(), R"({"ml":"team-admin"})");
  // Secrets stay out of allotd's log.
  std::string log = readFile(path("proc/allotd.1.err"));
  EXPECT_NE(log.find("login: failed for user 'alice'"), std::string::npos) << log;
  for (const char* secret : {"alice-ldap-pw", "not-alices-pw", "eve-ldap-pw", kAdminPassword})
    EXPECT_EQ(log.find(secret), std::string::npos) << secret;
}

TEST_F(LdapLoginTest, FilterInjectionInTheUserNameIsHarmless) {
  createTeam("ml");
  // Unescaped, each would match alice (or everyone) and bind as the first match.
  for (const std::string name :
       {"*", "alic*", "*)(uid=alice", "alice)(|(uid=*", "x)(uid=*))(|(uid=*"}) {
    auto res = login(name, "alice-ldap-pw");
    EXPECT_EQ(res.status, 401) << name << ": " << res.body;
  }
  EXPECT_EQ(login("alice", "alice-ldap-pw").status, 200);
}

// Attack: guessing alice's password under other spellings of her name, each with a failure limit
// of its own. The directory matches "alice " and " alice" to alice, and before, "al{dn}ice" became
// "alice" in the filter; a right guess then answered 400 ("may contain only a-z..."), a wrong one
// 401. Now every such spelling fails as an unknown user, right password or not, without asking
// the directory.
TEST_F(LdapLoginTest, OtherSpellingsOfANameAreNotTriedAgainstTheDirectory) {
  createTeam("ml");
  for (const std::string name : {"alice ", " alice", "al{dn}ice", "{dn}alice", "alice{dn}"}) {
    auto res = login(name, "alice-ldap-pw");
    EXPECT_EQ(res.status, 401) << "'" << name << "': " << res.body;
    EXPECT_EQ(textOf(res.parsed()["error"], "message"), "invalid user name or password");
  }
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/users/alice", "", adminToken_).status, 404)
      << "no spelling logged alice in";
}

// Attack, by a team-admin: an account named as a directory user who has not logged in yet. A
// local account is checked first at login, so the directory user could not log in, and whoever
// set its password would log in as them. Before, a team-admin could make such a service account,
// and a platform admin such a person; both are refused now, naming the field, and the directory
// user logs in as before. When the directory cannot be asked, the account is not made either.
TEST_F(LdapLoginTest, NoLocalAccountTakesADirectoryUsersName) {
  createTeam("ml");
  auto eve = login("eve", "eve-ldap-pw");  // team-admin of ml through ml-leads
  ASSERT_EQ(eve.status, 200) << eve.body;
  const std::string eveToken = textOf(eve.parsed(), "token");
  auto create = [&](const json& body, const std::string& token) {
    return httpRequest(port_, "POST", "/api/v1/users", body.dump(), token);
  };
  auto squat = create({{"name", "alice"}, {"team", "ml"}, {"kind", "service"}}, eveToken);
  EXPECT_EQ(squat.status, 409) << squat.body;
  EXPECT_EQ(textOf(squat.parsed()["error"], "message")
                .rfind("name: 'alice' is a user of the "
                       "directory",
                       0),
            0u)
      << squat.body;
  auto person =
      create({{"name", "alice"}, {"team", "ml"}, {"password", "chosen-by-the-admin"}}, adminToken_);
  EXPECT_EQ(person.status, 409) << person.body;
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/users/alice", "", adminToken_).status, 404);
  EXPECT_EQ(login("alice", "alice-ldap-pw").status, 200) << "alice's logins are still hers";
  // Names the directory does not have are made as before.
  EXPECT_EQ(create({{"name", "ci-bot"}, {"team", "ml"}, {"kind", "service"}}, eveToken).status,
            201);
  // A member who may not create accounts is refused before the directory is asked.
  auto member = create({{"name", "zed"}, {"team", "ml"}, {"kind", "service"}},
                       textOf(login("alice", "alice-ldap-pw").parsed(), "token"));
  EXPECT_EQ(member.status, 403) << member.body;
  slapd_.reset();
  auto unsure = create({{"name", "ci-bot-2"}, {"team", "ml"}, {"kind", "service"}}, eveToken);
  EXPECT_EQ(unsure.status, 503) << unsure.body;
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/users/ci-bot-2", "", adminToken_).status, 404);
}

}  // namespace
}  // namespace allot::it
