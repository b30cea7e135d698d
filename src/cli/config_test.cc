#include "cli/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace allot::cli {
namespace {

namespace fs = std::filesystem;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/allot_cli_config_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  EnvLookup lookup() {
    return [this](const std::string& name) -> std::optional<std::string> {
      auto it = vars_.find(name);
      if (it == vars_.end() || it->second.empty()) return std::nullopt;
      return it->second;
    };
  }
  void writeFile(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }

  std::string dir_;
  std::map<std::string, std::string> vars_;
};

TEST_F(ConfigTest, PathPrefersAllotConfigThenXdgThenHome) {
  vars_["HOME"] = "/home/a";
  EXPECT_EQ(*configPath(lookup()), "/home/a/.config/allot/config.json");
  vars_["XDG_CONFIG_HOME"] = "/xdg";
  EXPECT_EQ(*configPath(lookup()), "/xdg/allot/config.json");
  vars_["ALLOT_CONFIG"] = "/etc/my.json";
  EXPECT_EQ(*configPath(lookup()), "/etc/my.json");
  vars_.clear();
  EXPECT_FALSE(configPath(lookup()).ok());
}

TEST_F(ConfigTest, DefaultsWhenNothingIsSet) {
  vars_["HOME"] = dir_;
  auto s = resolveSettings("", "", lookup());
  ASSERT_TRUE(s.ok()) << s.status().toString();
  EXPECT_EQ(s->server, "http://127.0.0.1:7070");
  EXPECT_EQ(s->token, "");
}

TEST_F(ConfigTest, FlagBeatsEnvBeatsFile) {
  vars_["HOME"] = dir_;
  writeFile(dir_ + "/.config/allot/config.json",
            R"({"server":"http://file:1","token":"file-token"})");
  auto fromFile = resolveSettings("", "", lookup());
  ASSERT_TRUE(fromFile.ok());
  EXPECT_EQ(fromFile->server, "http://file:1");
  EXPECT_EQ(fromFile->token, "file-token");

  vars_["ALLOT_SERVER"] = "http://env:2";
  vars_["ALLOT_TOKEN"] = "env-token";
  auto fromEnv = resolveSettings("", "", lookup());
  EXPECT_EQ(fromEnv->server, "http://env:2");
  EXPECT_EQ(fromEnv->token, "env-token");

  auto fromFlags = resolveSettings("http://flag:3", "flag-token", lookup());
  EXPECT_EQ(fromFlags->server, "http://flag:3");
  EXPECT_EQ(fromFlags->token, "flag-token");

  // The file's token goes only to the server it was saved for (a trailing slash aside).
  vars_.erase("ALLOT_SERVER");
  vars_.erase("ALLOT_TOKEN");
  auto same = resolveSettings("http://file:1/", "", lookup());
  EXPECT_EQ(same->token, "file-token");
  EXPECT_EQ(same->tokenWithheldFrom, "");
}

// Attack: a repository's .envrc (or a pasted command) points ALLOT_SERVER at a server its author
// runs. The token `allot login` saved for the real server is not sent there; the 401 that
// follows says why.
TEST_F(ConfigTest, TheSavedTokenGoesOnlyToTheServerItWasSavedFor) {
  vars_["HOME"] = dir_;
  writeFile(dir_ + "/.config/allot/config.json",
            R"({"server":"https://allot.corp","token":"file-token"})");
  vars_["ALLOT_SERVER"] = "http://evil.example:7070";
  auto s = resolveSettings("", "", lookup());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->server, "http://evil.example:7070");
  EXPECT_EQ(s->token, "");
  EXPECT_EQ(s->tokenWithheldFrom, "http://evil.example:7070");
  auto flag = resolveSettings("http://evil.example:7070", "", lookup());
  EXPECT_EQ(flag->token, "");
  // A token given for this server is the caller's choice.
  vars_["ALLOT_TOKEN"] = "env-token";
  EXPECT_EQ(resolveSettings("", "", lookup())->token, "env-token");
  // A file without a server saved its token for the default one.
  vars_.clear();
  vars_["HOME"] = dir_;
  writeFile(dir_ + "/.config/allot/config.json", R"({"token":"file-token"})");
  EXPECT_EQ(resolveSettings("http://127.0.0.1:7070", "", lookup())->token, "file-token");
  EXPECT_EQ(resolveSettings("http://10.0.0.9:7070", "", lookup())->token, "");
}

TEST_F(ConfigTest, EmptyEnvironmentValuesCountAsUnset) {
  vars_["HOME"] = dir_;
  vars_["ALLOT_TOKEN"] = "";
  writeFile(dir_ + "/.config/allot/config.json", R"({"token":"file-token"})");
  EXPECT_EQ(resolveSettings("", "", lookup())->token, "file-token");
}

TEST_F(ConfigTest, MalformedFileIsAnErrorNamingIt) {
  vars_["ALLOT_CONFIG"] = dir_ + "/bad.json";
  writeFile(dir_ + "/bad.json", "{not json");
  auto s = resolveSettings("", "", lookup());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(dir_ + "/bad.json"), std::string::npos);
  // ...but not read at all when flags settle everything.
  EXPECT_TRUE(resolveSettings("http://x:1", "t", lookup()).ok());
}

TEST_F(ConfigTest, SaveCreatesDirectoryAndWritesMode0600) {
  std::string path = dir_ + "/xdg/allot/config.json";
  ASSERT_TRUE(saveConfig(path, {"http://h:7070", "secret"}).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto loaded = loadConfig(path);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->server, "http://h:7070");
  EXPECT_EQ(loaded->token, "secret");

  // Rewriting a file that someone made world-readable makes it private again.
  ::chmod(path.c_str(), 0644);
  ASSERT_TRUE(saveConfig(path, {"http://h:7071", "other"}).ok());
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(loadConfig(path)->token, "other");
}

TEST_F(ConfigTest, MissingFileIsEmpty) {
  auto c = loadConfig(dir_ + "/nope.json");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->server.empty());
  EXPECT_TRUE(c->token.empty());
}

TEST_F(ConfigTest, ProcessEnvironmentUsesAllotConfig) {
  std::string path = dir_ + "/env.json";
  writeFile(path, R"({"server":"http://from-process-env:9","token":"pt"})");
  ::setenv("ALLOT_CONFIG", path.c_str(), 1);
  ::unsetenv("ALLOT_SERVER");
  ::unsetenv("ALLOT_TOKEN");
  auto s = resolveSettings("", "", processEnv());
  ::unsetenv("ALLOT_CONFIG");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->server, "http://from-process-env:9");
  EXPECT_EQ(s->token, "pt");
}

}  // namespace
}  // namespace allot::cli
