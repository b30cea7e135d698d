// Passwords, logins, console sessions with CSRF, logout and failure limits, against a real
// allotd (docs/login.md). The directory logins are in ldap_login_test.cc.

#include <fstream>
#include <thread>

#include "harness.h"

namespace allot::it {
namespace {

constexpr const char* kAlicePassword = "alice-first-secret";

class LoginTest : public TestCluster {
 protected:
  std::vector<std::string> serverFlags() const override {
    writeFile(path("allotd.toml"),
              "[login]\n"
              "max_failures_per_account = 3\n"
              "max_failures_per_address = 6\n"
              "failure_window = \"15m\"\n");
    return {"--heartbeat", "1s", "--config", path("allotd.toml")};
  }

  HttpResult post(const std::string& target, const json& body, const std::string& token = "",
                  const std::map<std::string, std::string>& headers = {}) {
    return httpRequest(port_, "POST", target, body.dump(), token, headers);
  }
  HttpResult login(const std::string& user, const std::string& password, bool session = false) {
    return post("/api/v1/login", {{"user", user}, {"password", password}, {"session", session}});
  }
  // Team ml and alice, a member with a password.
  void makeAlice() {
    createTeam("ml");
    auto made =
        post("/api/v1/users", {{"name", "alice"}, {"team", "ml"}, {"password", kAlicePassword}},
             adminToken_);
    ASSERT_EQ(made.status, 201) << made.body;
    EXPECT_EQ(made.parsed().value("has_password", false), true);
    EXPECT_EQ(made.body.find(kAlicePassword), std::string::npos);
  }
  std::string serverLog() const { return readFile(path("proc/allotd.1.err")); }
};

TEST_F(LoginTest, PasswordPolicyIsEnforcedWithA400NamingTheField) {
  createTeam("ml");
  auto shortPw =
      post("/api/v1/users", {{"name", "bob"}, {"team", "ml"}, {"password", "short"}}, adminToken_);
  EXPECT_EQ(shortPw.status, 400) << shortPw.body;
  EXPECT_EQ(shortPw.parsed()["error"].value("field", ""), "password");
  auto longPw =
      post("/api/v1/users", {{"name", "bob"}, {"team", "ml"}, {"password", std::string(1025, 'x')}},
           adminToken_);
  EXPECT_EQ(longPw.status, 400);
  // Nothing was created.
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/users/bob", "", adminToken_).status, 404);
}

TEST_F(LoginTest, PasswordLoginGivesAnApiTokenAndFailuresLookAlike) {
  makeAlice();
  auto wrong = login("alice", "not-the-password");
  auto unknown = login("nobody", "not-the-password");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(unknown.status, 401);
  EXPECT_EQ(wrong.body, unknown.body);  // whether or not the user exists
  EXPECT_NE(wrong.body.find("invalid user name or password"), std::string::npos);

  auto ok = login("alice", kAlicePassword);
  ASSERT_EQ(ok.status, 200) << ok.body;
  std::string token = textOf(ok.parsed(), "token");
  ASSERT_FALSE(token.empty());
  EXPECT_FALSE(ok.parsed()["expires_at"].is_null());  // CLI logins expire (30 days)
  auto who = httpRequest(port_, "GET", "/api/v1/whoami", "", token);
  EXPECT_EQ(who.parsed().value("name", ""), "alice");
  auto tokens = httpRequest(port_, "GET", "/api/v1/tokens", "", token).parsed();
  bool named = false;
  for (const auto& t : tokens)
    named |= t.value("name", "") == "login" && t.value("kind", "") == "api";
  EXPECT_TRUE(named) << tokens.dump();

  // Secrets never reach the log: not the passwords tried, not the token issued. The log did
  // record both logins, so this reads the right output.
  std::string log = serverLog();
  EXPECT_NE(log.find("login: failed for user 'alice'"), std::string::npos) << log;
  EXPECT_NE(log.find("login: user 'alice'"), std::string::npos) << log;
  EXPECT_EQ(log.find(kAlicePassword), std::string::npos);
  EXPECT_EQ(log.find("not-the-password"), std::string::npos);
  EXPECT_EQ(log.find(token.substr(token.find('_'))), std::string::npos);
}

TEST_F(LoginTest, CliLoginWithUserSavesAWorkingToken) {
  makeAlice();
  const std::string config = path("cli/alice.json");
  auto proc = Process::spawn(
      {"/bin/sh", "-c",
       "printf '%s\\n' \"$PW\" | \"$ALLOT\" --server " + url_ + " login --user alice"},
      path("cli/login.out"), path("cli/login.err"),
      childEnv({"ALLOT_CONFIG=" + config, std::string("PW=") + kAlicePassword,
                "ALLOT=" + binPath("allot")}));
  auto code = proc->waitFor(kTimeout);
  ASSERT_TRUE(code.has_value());
  ASSERT_EQ(*code, 0) << proc->stderrText();
  EXPECT_NE(proc->stdoutText().find("as alice"), std::string::npos) << proc->stdoutText();
  json saved = json::parse(readFile(config));
  std::string token = textOf(saved, "token");
  ASSERT_FALSE(token.empty());
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/whoami", "", token).status, 200);

  // A wrong password: a one-line error, non-zero exit, nothing saved.
  std::remove(config.c_str());
  auto bad =
      Process::spawn({"/bin/sh", "-c",
                      "echo wrong-password | \"$ALLOT\" --server " + url_ + " login --user alice"},
                     path("cli/bad.out"), path("cli/bad.err"),
                     childEnv({"ALLOT_CONFIG=" + config, "ALLOT=" + binPath("allot")}));
  auto badCode = bad->waitFor(kTimeout);
  ASSERT_TRUE(badCode.has_value());
  EXPECT_NE(*badCode, 0);
  EXPECT_NE(bad->stderrText().find("invalid user name or password"), std::string::npos)
      << bad->stderrText();
  EXPECT_TRUE(readFile(config).empty());
}

TEST_F(LoginTest, ConsoleSessionCookieNeedsCsrfForWritesAndEndsAtLogout) {
  makeAlice();
  auto res = login("alice", kAlicePassword, /*session=*/true);
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_FALSE(res.parsed().contains("token"));  // the secret lives only in the cookie
  std::string csrf = textOf(res.parsed(), "csrf_token");
  ASSERT_FALSE(csrf.empty());
  const std::string setCookie = res.headers["set-cookie"];
  EXPECT_NE(setCookie.find("HttpOnly"), std::string::npos) << setCookie;
  EXPECT_NE(setCookie.find("SameSite=Strict"), std::string::npos);
  EXPECT_NE(setCookie.find("Path=/"), std::string::npos);
  ASSERT_EQ(setCookie.rfind("allot_session=", 0), 0u) << setCookie;
  const std::string secret = setCookie.substr(14, setCookie.find(';') - 14);
  const std::map<std::string, std::string> cookie = {{"Cookie", "allot_session=" + secret}};

  // Reads need only the cookie; whoami tells a reloaded console its CSRF token.
  auto who = httpRequest(port_, "GET", "/api/v1/whoami", "", "", cookie);
  ASSERT_EQ(who.status, 200) << who.body;
  EXPECT_EQ(who.parsed().value("name", ""), "alice");
  EXPECT_EQ(textOf(who.parsed(), "csrf_token"), csrf);

  // A write without the CSRF header (what a forged cross-site form sends) is refused.
  auto forged = post("/api/v1/tokens", {{"name", "forged"}}, "", cookie);
  EXPECT_EQ(forged.status, 403) << forged.body;
  auto headers = cookie;
  headers["X-CSRF-Token"] = std::string(csrf.size(), '0');
  EXPECT_EQ(post("/api/v1/tokens", {{"name", "wrong"}}, "", headers).status, 403);
  headers["X-CSRF-Token"] = csrf;
  EXPECT_EQ(post("/api/v1/tokens", {{"name", "real"}}, "", headers).status, 201);
  // The session secret is no bearer token.
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/whoami", "", secret).status, 401);

  auto out = post("/api/v1/logout", json::object(), "", headers);
  ASSERT_EQ(out.status, 200) << out.body;
  EXPECT_NE(out.headers["set-cookie"].find("Max-Age=0"), std::string::npos);
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/whoami", "", "", cookie).status, 401);
}

TEST_F(LoginTest, ChangingPasswords) {
  makeAlice();
  std::string alice = textOf(login("alice", kAlicePassword).parsed(), "token");
  ASSERT_FALSE(alice.empty());
  const std::string target = "/api/v1/users/alice/password";
  auto put = [&](const json& body, const std::string& token) {
    return httpRequest(port_, "PUT", target, body.dump(), token);
  };
  auto noCurrent = put({{"password", "second-secret-1"}}, alice);
  EXPECT_EQ(noCurrent.status, 400);
  EXPECT_EQ(noCurrent.parsed()["error"].value("field", ""), "current_password");
  EXPECT_EQ(
      put({{"password", "second-secret-1"}, {"current_password", "wrong-one-here"}}, alice).status,
      403);
  EXPECT_EQ(put({{"password", "short"}, {"current_password", kAlicePassword}}, alice).status, 400);
  ASSERT_EQ(
      put({{"password", "second-secret-1"}, {"current_password", kAlicePassword}}, alice).status,
      200);
  EXPECT_EQ(login("alice", kAlicePassword).status, 401);
  EXPECT_EQ(login("alice", "second-secret-1").status, 200);

  // A platform admin resets it without the current one; a team-mate may not.
  ASSERT_EQ(put({{"password", "admin-set-secret"}}, adminToken_).status, 200);
  EXPECT_EQ(login("alice", "admin-set-secret").status, 200);
  std::string bob = createUser("bob", "ml");
  EXPECT_EQ(put({{"password", "bob-chose-this"}}, bob).status, 403);
  createTeam("cv");
  std::string carol = createUser("carol", "cv");
  EXPECT_EQ(put({{"password", "carol-chose-this"}}, carol).status, 404);  // another team's user
}

TEST_F(LoginTest, AFirstPasswordNeedsNoCurrentOne) {
  // The admin allotd created has only a token; `make run` gives it a console password this way.
  auto own = [&](const json& body) {
    return httpRequest(port_, "PUT", "/api/v1/users/admin/password", body.dump(), adminToken_);
  };
  ASSERT_EQ(own({{"password", "first-admin-secret"}}).status, 200);
  EXPECT_EQ(login("admin", "first-admin-secret").status, 200);
  // Once there is one, changing it needs it.
  auto again = own({{"password", "second-admin-secret"}});
  EXPECT_EQ(again.status, 400);
  EXPECT_EQ(again.parsed()["error"].value("field", ""), "current_password");
}

TEST_F(LoginTest, FailuresPerAccountAreLimited) {
  makeAlice();
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(login("alice", "wrong-guess-" + std::to_string(i)).status, 401);
  // Blocked even with the right password: the guesser cannot tell.
  auto blocked = login("alice", kAlicePassword);
  EXPECT_EQ(blocked.status, 429) << blocked.body;
  EXPECT_GT(std::stoi(blocked.headers["retry-after"]), 0);
  // Another account from the same address is not blocked (3 < 6 address failures).
  auto made = post("/api/v1/users",
                   {{"name", "bob"}, {"team", "ml"}, {"password", "bob-password-1"}}, adminToken_);
  ASSERT_EQ(made.status, 201);
  EXPECT_EQ(login("bob", "bob-password-1").status, 200);
}

// Attack: guesses sent at once. Each takes a password hash's time to check, and before, every
// guess that came while none had failed yet was checked (about 34 at once against a limit of 5).
// Now attempts under way count: whatever the timing, at most the limit's guesses are checked.
TEST_F(LoginTest, GuessesSentAtOnceAreCheckedNoMoreThanTheLimitAllows) {
  makeAlice();
  constexpr int kGuesses = 24;
  std::vector<int> statuses(kGuesses);
  std::vector<std::thread> guessers;
  for (int i = 0; i < kGuesses; ++i)
    guessers.emplace_back(
        [&, i] { statuses[i] = login("alice", "wrong-guess-" + std::to_string(i)).status; });
  for (auto& t : guessers) t.join();
  int checked = 0;
  for (int status : statuses) {
    EXPECT_TRUE(status == 401 || status == 429 || status == 503) << status;
    checked += status == 401;
  }
  EXPECT_GE(checked, 1);
  EXPECT_LE(checked, 3) << "the account's limit is 3";
  // The guesses that were checked may have used the account's limit up.
  const int right = login("alice", kAlicePassword).status;
  EXPECT_EQ(right, checked == 3 ? 429 : 200);
}

TEST_F(LoginTest, FailuresPerAddressAreLimited) {
  makeAlice();
  // One address spraying guesses over many accounts: no account reaches its own limit.
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(login("user" + std::to_string(i), "wrong-guess").status, 401);
  auto blocked = login("alice", kAlicePassword);
  EXPECT_EQ(blocked.status, 429) << blocked.body;
  EXPECT_FALSE(blocked.headers["retry-after"].empty());
}

// Attack, login CSRF: another site's form posts a text/plain body that parses as the attacker's
// login ({"user":"mallory","password":"pw as a field name, x","session":true} as its value), and
// the victim's browser keeps the session cookie of the answer. A login must say it is JSON (which
// a form cannot, nor another site's script without a preflight allotd never grants), and one a
// browser marks cross-site is refused; neither logs anyone in.
TEST_F(LoginTest, AnotherSitesFormCannotLogTheBrowserIn) {
  makeAlice();
  const json body = {{"user", "alice"}, {"password", kAlicePassword}, {"session", true}};
  auto plain = httpRequest(port_, "POST", "/api/v1/login", body.dump(), "",
                           {{"Content-Type", "text/plain"}});
  EXPECT_EQ(plain.status, 415) << plain.body;
  EXPECT_EQ(plain.parsed()["error"].value("field", ""), "Content-Type");
  EXPECT_TRUE(plain.headers["set-cookie"].empty());
  auto crossSite = httpRequest(port_, "POST", "/api/v1/login", body.dump(), "",
                               {{"Sec-Fetch-Site", "cross-site"}});
  EXPECT_EQ(crossSite.status, 403) << crossSite.body;
  EXPECT_TRUE(crossSite.headers["set-cookie"].empty());
  // The console's own request, same origin, JSON with a charset: logged in.
  auto own = httpRequest(
      port_, "POST", "/api/v1/login", body.dump(), "",
      {{"Content-Type", "application/json; charset=utf-8"}, {"Sec-Fetch-Site", "same-origin"}});
  EXPECT_EQ(own.status, 200) << own.body;
  EXPECT_FALSE(own.headers["set-cookie"].empty());
}

// Attack: with a stolen token, guessing the owner's password through a password change, to keep
// the account once the token is revoked. Each wrong current password counts as a failed login.
TEST_F(LoginTest, GuessesAtTheCurrentPasswordCountAsFailedLogins) {
  makeAlice();
  std::string alice = textOf(login("alice", kAlicePassword).parsed(), "token");
  ASSERT_FALSE(alice.empty());
  auto change = [&](const std::string& current) {
    return httpRequest(port_, "PUT", "/api/v1/users/alice/password",
                       json{{"password", "stolen-and-kept"}, {"current_password", current}}.dump(),
                       alice);
  };
  for (int i = 0; i < 3; ++i) EXPECT_EQ(change("guess-number-" + std::to_string(i)).status, 403);
  auto blocked = change(kAlicePassword);
  EXPECT_EQ(blocked.status, 429) << "blocked even with the right one: the guesser cannot tell";
  EXPECT_EQ(login("alice", kAlicePassword).status, 429) << "and the account's logins with it";
}

// Attack: one person guessed at under many spellings, each with a failure limit of its own. A
// directory matches names without regard to case or spaces around them (and before, "al{dn}ice"
// became alice in the directory's filter), so only names allotd itself may give count as
// accounts; the rest fail as an unknown user does, against the address.
TEST_F(LoginTest, NamesNoAccountMayHaveFailAsUnknownUsersDo) {
  makeAlice();
  EXPECT_EQ(login("ALICE", kAlicePassword).status, 200) << "case is folded, as before";
  for (const char* spelling : {"alice ", " alice", "al{dn}ice", "al*", "ali\\63e"}) {
    auto r = login(spelling, kAlicePassword);
    EXPECT_EQ(r.status, 401) << spelling << ": " << r.body;
    EXPECT_EQ(textOf(r.parsed()["error"], "message"), "invalid user name or password");
  }
  // Five failures from this address so far (limit 6): one more, and it is blocked.
  EXPECT_EQ(login("alice{user}", "x").status, 401);
  EXPECT_EQ(login("alice", kAlicePassword).status, 429);
}

}  // namespace
}  // namespace allot::it
