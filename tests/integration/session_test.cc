// Interactive sessions (docs/sessions.md) with a real Jupyter: Debian's jupyter-server started by
// a real agent (through its fork server), several sessions of one user side by side, names,
// profile limits, and another team's user told nothing.

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>

#include "harness.h"

namespace allot::it {
namespace {

namespace fs = std::filesystem;

// GET `target` from the HTTP server on the Unix socket `path`; the status code and body. 0 when
// nothing answers.
std::pair<int, std::string> unixGet(const std::string& path, const std::string& target,
                                    const std::string& token) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return {0, ""};
  }
  std::string req = "GET " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
  if (!token.empty()) req += "Authorization: token " + token + "\r\n";
  req += "\r\n";
  (void)!::write(fd, req.data(), req.size());
  std::string resp;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) resp.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (resp.rfind("HTTP/1.1 ", 0) != 0) return {0, resp};
  const size_t body = resp.find("\r\n\r\n");
  return {std::atoi(resp.c_str() + 9), body == std::string::npos ? "" : resp.substr(body + 4)};
}

class SessionTest : public TestCluster {
 protected:
  void SetUp() override {
    if (!fs::exists("/usr/bin/jupyter-server"))
      GTEST_SKIP() << "Debian's jupyter-server is not installed (scripts/install-deps.sh)";
    TestCluster::SetUp();
    createTeam("red");
    createTeam("blue");
    alice_ = createUser("alice", "red");
    bob_ = createUser("bob", "blue");
    startAgent("h1");
  }

  json create(const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"session", "create"};
    args.insert(args.end(), flags.begin(), flags.end());
    return cliJson(alice_, args);
  }

  // Waits until `allot session open` says it answers; the session as it is then.
  json openWhenRunning(const std::string& token, const std::string& session) {
    json s = cliJson(token, {"session", "show", session});
    auto r = cliAs(token, {"session", "open", session, "--no-browser", "--wait", "30s"});
    EXPECT_EQ(r.code, 0) << r.describe() << "\n--- its output:\n"
                         << logs(token, s["id"].get<int64_t>());
    return cliJson(token, {"session", "show", std::to_string(s["id"].get<int64_t>())});
  }

  std::string socketOf(int64_t id) {
    return path("agents/h1/jobs/" + std::to_string(id) + "/work/jupyter.sock");
  }
  std::string tokenOf(int64_t id) {
    return trim(readFile(path("agents/h1/sessions/" + std::to_string(id) + ".token")));
  }

  std::string alice_, bob_;
};

TEST_F(SessionTest, JupyterAnswersUnderItsBaseUrlWithItsOwnToken) {
  json s = create({"--name", "exp1"});
  const int64_t id = s["id"].get<int64_t>();
  EXPECT_EQ(textOf(s, "profile"), "jupyter");
  EXPECT_EQ(textOf(s, "app"), "jupyter-server");
  EXPECT_EQ(textOf(s, "url"), "/sessions/" + std::to_string(id) + "/");

  json running = openWhenRunning(alice_, "exp1");
  EXPECT_EQ(textOf(running, "state"), "running") << running.dump();
  EXPECT_EQ(textOf(running, "host"), "h1");
  // The token never leaves allotd and the agent.
  ASSERT_FALSE(tokenOf(id).empty());
  EXPECT_EQ(running.dump().find(tokenOf(id)), std::string::npos);

  const std::string status = "/sessions/" + std::to_string(id) + "/api/status";
  auto [code, body] = unixGet(socketOf(id), status, tokenOf(id));
  EXPECT_EQ(code, 200) << body;
  EXPECT_EQ(unixGet(socketOf(id), status, "").first, 403);
  // The socket is its owner's alone.
  struct stat st {};
  ASSERT_EQ(::stat(socketOf(id).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // Stopped: Jupyter is gone, and so is its token.
  json stopped = cliJson(alice_, {"session", "stop", "exp1"});
  EXPECT_TRUE(waitFor([&] {
    return textOf(cliJson(alice_, {"session", "show", std::to_string(id)}), "state") == "stopped";
  }));
  EXPECT_TRUE(waitFor([&] { return !fs::exists(path("agents/h1/sessions/" + std::to_string(id) + ".token")); }));
  EXPECT_EQ(unixGet(socketOf(id), status, tokenOf(id)).first, 0);
}

TEST_F(SessionTest, TwoSessionsOfOneUserRunSideBySide) {
  json a = create({"--name", "left"});
  json b = create({});  // named after its profile
  EXPECT_EQ(textOf(b, "name"), "jupyter");
  json c = create({});
  EXPECT_EQ(textOf(c, "name"), "jupyter-2");
  // A live session's name is taken.
  auto dup = cliAs(alice_, {"session", "create", "--name", "left"});
  EXPECT_NE(dup.code, 0);
  EXPECT_NE(dup.err.find("already have a session named 'left'"), std::string::npos) << dup.err;

  for (const char* name : {"left", "jupyter", "jupyter-2"}) openWhenRunning(alice_, name);
  for (const json& s : {a, b, c}) {
    const int64_t id = s["id"].get<int64_t>();
    EXPECT_EQ(unixGet(socketOf(id), "/sessions/" + std::to_string(id) + "/api/status", tokenOf(id))
                  .first,
              200);
  }
  json list = cliJson(alice_, {"session", "list"});
  EXPECT_EQ(list.size(), 3u);
  // Jupyter runs in each session's own working directory, as the job's process.
  cliJson(alice_, {"session", "stop", "left"});
  EXPECT_TRUE(waitFor([&] { return cliJson(alice_, {"session", "list"}).size() == 2; }));
  // Its name is free again.
  EXPECT_EQ(textOf(create({"--name", "left"}), "name"), "left");
}

TEST_F(SessionTest, AnotherTeamsUserIsToldNothing) {
  json s = create({"--name", "mine"});
  const std::string id = std::to_string(s["id"].get<int64_t>());
  for (const auto& path : {"/api/v1/sessions/" + id}) {
    auto r = httpRequest(port_, "GET", path, "", bob_);
    EXPECT_EQ(r.status, 404) << r.body;
  }
  auto stop = httpRequest(port_, "POST", "/api/v1/sessions/" + id + "/stop", "{}", bob_);
  EXPECT_EQ(stop.status, 404) << stop.body;
  EXPECT_TRUE(cliJson(bob_, {"session", "list", "--all"}).empty());
  auto share = httpRequest(port_, "PUT", "/api/v1/sessions/" + id + "/shared-with",
                           R"({"users":["bob"]})", alice_);
  EXPECT_EQ(share.status, 404) << share.body;  // bob is not in alice's team
}

TEST_F(SessionTest, BadRequestsNameTheirFieldAndChangeNothing) {
  struct Case {
    std::string body;
    int status;
    std::string field;
  } cases[] = {
      {R"({"profile":"nope"})", 404, "profile"},
      {R"({"storage":"tape"})", 400, "storage"},
      {R"({"storage":"shared"})", 400, "storage"},  // the jupyter profile offers scratch, local
      {R"({"gpus":-1})", 400, "gpus"},
      {R"({"gpu_milli":250,"gpus":2})", 400, "gpu_milli"},
      {R"({"name":"Bad Name"})", 400, "name"},
      {R"({"colour":"red"})", 400, "colour"},
  };
  for (const auto& c : cases) {
    auto r = httpRequest(port_, "POST", "/api/v1/sessions", c.body, alice_);
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    EXPECT_EQ(textOf(r.parsed()["error"], "field"), c.field) << c.body << " -> " << r.body;
  }
  EXPECT_TRUE(cliJson(alice_, {"session", "list", "--ended"}).empty());
  // A profile's maximum binds.
  cli({"profile", "create", "small", "--team", "red", "--max-gpus", "1", "--", "jupyter-server"});
  auto over = httpRequest(port_, "POST", "/api/v1/sessions", R"({"profile":"small","gpus":2})",
                          alice_);
  EXPECT_EQ(over.status, 400) << over.body;
  EXPECT_EQ(textOf(over.parsed()["error"], "field"), "gpus");
  auto cli = cliAs(alice_, {"session", "create", "--gpus", "1", "--gpu-fraction", "0.5"});
  EXPECT_NE(cli.code, 0);
  EXPECT_NE(cli.err.find("--gpus and --gpu-fraction"), std::string::npos) << cli.err;
}

}  // namespace
}  // namespace allot::it
