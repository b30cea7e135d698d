// Sessions in images and teams' registry logins (docs/environments.md), end to end: a registry
// on loopback that serves one account only (htpasswd), a Jupyter image the suite builds from
// this machine's Debian packages (tests/images/host_packages_rootfs.py), allotd, a root agent
// and the CLI. A session from a profile with an image runs that image's Jupyter, reached through
// allotd's proxy as any session is; the team's login fetches it, another team without one is
// refused by the registry even once the host holds the image, and the password is written
// nowhere in the clear. Needs root (crun, and switching users).

#include <dirent.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "image_cluster.h"

namespace allot::it {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAccount = "ml-puller";
constexpr const char* kPassword = "s3cret-for-ml-only";

// The process whose command line holds `needle`, or 0.
int processWith(const std::string& needle) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline");
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().find(needle) != std::string::npos) return std::stoi(name);
  }
  return 0;
}

// Whether any file under `dir` holds `secret`.
bool anyFileHolds(const fs::path& dir, const std::string& secret) {
  std::error_code ec;
  for (auto it =
           fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (data.find(secret) != std::string::npos) {
      ADD_FAILURE() << it->path() << " holds the password";
      return true;
    }
  }
  return false;
}

class ImageSessionTest : public ImageCluster<ImageSessionTest> {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists("/usr/bin/jupyter-server")) return;
    startRegistry(std::string(kAccount) + ":" + kPassword);
    if (!registry_) return;
    jupyter_ = registry_->pushHostPackages(ALLOT_SOURCE_DIR, "test/jupyter",
                                           {"jupyter-server", "python3-jupyter-server", "dash"},
                                           "/usr/bin/jupyter-server");
  }

  void SetUp() override {
    if (!fs::exists("/usr/bin/jupyter-server"))
      GTEST_SKIP() << "Debian's jupyter-server is not installed (scripts/install-deps.sh)";
    ImageCluster::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // cv may use the image too: only the registry, which cv has no login to, keeps it from cv.
    auto set = cli({"team", "image-allow", "set", "cv", registry_->address() + "/test/"});
    ASSERT_EQ(set.code, 0) << set.describe();
  }

  static inline std::string jupyter_;
};

TEST_F(ImageSessionTest, AnImageProfilesSessionAnswersThroughTheProxyPulledWithItsTeamsLogin) {
  // The team's login, set through the API (the CLI reads the password from the terminal or
  // stdin); shown back without the password.
  const std::string logins = "/api/v1/teams/ml/registry-logins/";
  auto set = httpRequest(port_, "PUT", logins + registry_->address(),
                         json{{"username", kAccount}, {"password", kPassword}}.dump(), adminToken_);
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(set.body.find(kPassword), std::string::npos);
  auto listed = cliAs(alice_, {"team", "registry-login", "list", "ml"});
  EXPECT_EQ(listed.code, 0) << listed.describe();
  EXPECT_NE(listed.out.find(kAccount), std::string::npos) << listed.out;
  EXPECT_EQ(listed.out.find(kPassword), std::string::npos);
  // cv has none: the registry refuses cv's job, which fails saying so.
  json last;
  const int64_t refused = submit(bob_, {"--image", jupyter_}, {"true"});
  ASSERT_TRUE(waitForJobState(bob_, refused, "failed", &last)) << last.dump();
  EXPECT_NE(textOf(last, "reason").find("without a login"), std::string::npos) << last.dump();

  auto profile = cli({"profile", "create", "lab", "--team", "ml", "--image", jupyter_, "--storage",
                      "scratch", "--", "jupyter-server"});
  ASSERT_EQ(profile.code, 0) << profile.describe();
  json s = cliJson(alice_, {"session", "create", "--profile", "lab", "--name", "inimage"});
  const std::string id = std::to_string(s["id"].get<int64_t>());
  auto opened = cliAs(alice_, {"session", "open", "inimage", "--no-browser", "--wait", "180s"});
  ASSERT_EQ(opened.code, 0) << opened.describe() << "\n--- its output:\n"
                            << logs(alice_, s["id"].get<int64_t>());
  json shown = cliJson(alice_, {"job", "show", id});
  EXPECT_EQ(textOf(shown, "image"), jupyter_);
  EXPECT_EQ(textOf(shown, "image_digest").rfind("sha256:", 0), 0u) << shown.dump();

  // Through allotd's proxy, as any session: Jupyter answers, and writes to the session's storage.
  const std::string base = "/sessions/" + id + "/";
  auto status = httpRequest(port_, "GET", base + "api/status", "", alice_);
  EXPECT_EQ(status.status, 200) << status.body;
  EXPECT_EQ(httpRequest(port_, "GET", base + "api/status", "", bob_).status, 404);
  auto wrote = httpRequest(port_, "PUT", base + "api/contents/note.txt",
                           R"({"type":"file","format":"text","content":"from the image"})", alice_);
  EXPECT_EQ(wrote.status, 201) << wrote.body;
  // The Jupyter that answered is the image's: its root holds no skopeo, the host's does.
  const int pid = processWith("base_url=/sessions/" + id + "/");
  ASSERT_NE(pid, 0);
  const fs::path itsRoot = "/proc/" + std::to_string(pid) + "/root";
  EXPECT_TRUE(fs::exists(itsRoot / "usr/bin/jupyter-server"));
  EXPECT_FALSE(fs::exists(itsRoot / "usr/bin/skopeo"));
  EXPECT_TRUE(fs::exists("/usr/bin/skopeo"));

  // Held on h1 now, fetched with ml's login: cv's job is still refused by the registry, not
  // served from the cache.
  const int64_t again = submit(bob_, {"--image", jupyter_}, {"true"});
  ASSERT_TRUE(waitForJobState(bob_, again, "failed", &last)) << last.dump();
  EXPECT_NE(textOf(last, "reason").find("without a login"), std::string::npos) << last.dump();

  cliJson(alice_, {"session", "stop", "inimage"});
  EXPECT_TRUE(waitForSessionState(alice_, id, "stopped"));
  // Nowhere in the clear: not in allotd's or the agent's files, logs or image store.
  EXPECT_FALSE(anyFileHolds(root_, kPassword));
}

}  // namespace
}  // namespace allot::it
