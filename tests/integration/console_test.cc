// What the web console needs from allotd, through the real binaries: its files at "/", the live
// stream of change notices (GET /api/v1/stream), and usage over time (GET /api/v1/usage/series).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "harness.h"

namespace allot::it {
namespace {

// A raw HTTP client for a response that does not end: reads as it comes, until the text seen
// holds what the test waits for, or the connection closes.
class StreamClient {
 public:
  StreamClient(uint16_t port, const std::string& target, const std::string& token) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("cannot connect to allotd");
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
    req += "Accept: text/event-stream\r\n\r\n";
    if (::write(fd_, req.data(), req.size()) != static_cast<ssize_t>(req.size()))
      throw std::runtime_error("cannot send the request");
  }
  ~StreamClient() { ::close(fd_); }

  // Reads until `text` appears after `from` in what was received; false on timeout or close.
  bool waitFor(const std::string& text, size_t from = 0,
               std::chrono::milliseconds timeout = kTimeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (received_.find(text, from) == std::string::npos) {
      if (closed_ || std::chrono::steady_clock::now() > deadline) return false;
      readSome(deadline);
    }
    return true;
  }
  // Reads until the server closes the connection; false on timeout.
  bool waitForClose() {
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (!closed_ && std::chrono::steady_clock::now() < deadline) readSome(deadline);
    return closed_;
  }
  const std::string& received() const { return received_; }

 private:
  void readSome(std::chrono::steady_clock::time_point deadline) {
    pollfd p{fd_, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) <= 0) return;
    char buf[4096];
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) {
      closed_ = true;
      return;
    }
    received_.append(buf, static_cast<size_t>(n));
  }

  int fd_ = -1;
  bool closed_ = false;
  std::string received_;
};

class ConsoleTest : public TestCluster {
 protected:
  void SetUp() override {
    web_ = ::testing::TempDir() + "allotd-web-" + std::to_string(::getpid());
    std::filesystem::create_directories(web_ + "/assets");
    writeFile(web_ + "/index.html", "<!doctype html><title>Allot</title>");
    writeFile(web_ + "/assets/index-abc123.js", "console.log('allot')");
    writeFile(web_ + "/assets/index-abc123.js.gz", "pretend-gzip");
    TestCluster::SetUp();
  }
  void TearDown() override {
    TestCluster::TearDown();
    std::filesystem::remove_all(web_);
  }
  // Keepalives (and credential re-checks) every 300 ms, so that a revoked token's stream ends
  // within the test's patience.
  std::vector<std::string> serverFlags() const override {
    return {"--heartbeat", "1s", "--web-dir", web_, "--stream-keepalive", "300ms"};
  }
  std::string web_;
};

TEST_F(ConsoleTest, ServesTheConsoleFilesBesideTheApi) {
  HttpResult index = httpRequest(port_, "GET", "/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.body, "<!doctype html><title>Allot</title>");
  EXPECT_EQ(index.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_EQ(index.headers["cache-control"], "no-cache");
  EXPECT_NE(index.headers["content-security-policy"].find("frame-ancestors 'none'"),
            std::string::npos);
  EXPECT_EQ(index.headers["x-content-type-options"], "nosniff");

  HttpResult route = httpRequest(port_, "GET", "/hosts/gpu-01?tab=leases");
  EXPECT_EQ(route.status, 200);
  EXPECT_EQ(route.body, index.body);

  HttpResult gz =
      httpRequest(port_, "GET", "/assets/index-abc123.js", "", "", {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(gz.status, 200);
  EXPECT_EQ(gz.body, "pretend-gzip");
  EXPECT_EQ(gz.headers["content-encoding"], "gzip");
  EXPECT_EQ(gz.headers["cache-control"], "public, max-age=31536000, immutable");

  EXPECT_EQ(httpRequest(port_, "GET", "/assets/missing.js").status, 404);
  EXPECT_EQ(httpRequest(port_, "GET", "/../../etc/passwd").status, 404);
  // The API keeps its own answers: JSON 404s and 401s, never the console's page.
  HttpResult api = httpRequest(port_, "GET", "/api/v1/no-such-thing", "", adminToken_);
  EXPECT_EQ(api.status, 404);
  EXPECT_EQ(api.parsed().at("error").at("code"), "not_found") << api.body;
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/jobs").status, 401);
}

TEST_F(ConsoleTest, StreamAnnouncesChangesAndEndsWhenItsTokenIsRevoked) {
  createTeam("ml");
  const std::string alice = createUser("alice", "ml");

  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/stream").status, 401);
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/stream", "", "nope_nope").status, 401);

  StreamClient stream(port_, "/api/v1/stream", alice);
  ASSERT_TRUE(stream.waitFor("event: hello\ndata: {\"rev\":")) << stream.received();
  EXPECT_NE(stream.received().find("Content-Type: text/event-stream"), std::string::npos);
  EXPECT_NE(stream.received().find("Cache-Control: no-store"), std::string::npos);
  ASSERT_TRUE(stream.waitFor(": keepalive\n\n")) << stream.received();

  const size_t before = stream.received().size();
  submit(alice, {"--gpus", "1"}, {"sleep", "1"});
  ASSERT_TRUE(stream.waitFor("event: change\ndata: {\"rev\":", before)) << stream.received();
  ASSERT_TRUE(stream.waitFor("\"jobs\"", before)) << stream.received();
  // Notices name topics only, never objects.
  EXPECT_EQ(stream.received().find("sleep"), std::string::npos) << stream.received();

  // Another stream of alice's and one of the admin's: revoking alice's token ends hers only.
  StreamClient admin(port_, "/api/v1/stream", adminToken_);
  ASSERT_TRUE(admin.waitFor("event: hello"));
  const std::string tokenId = alice.substr(0, alice.find('_'));
  HttpResult revoke = httpRequest(port_, "DELETE", "/api/v1/tokens/" + tokenId, "", adminToken_);
  ASSERT_EQ(revoke.status, 200) << revoke.body;
  ASSERT_TRUE(stream.waitFor("event: expired\ndata: {}\n\n")) << stream.received();
  EXPECT_TRUE(stream.waitForClose());
  const size_t adminBefore = admin.received().size();
  ASSERT_TRUE(admin.waitFor(": keepalive\n\n", adminBefore));
  EXPECT_EQ(admin.received().find("event: expired"), std::string::npos);
}

TEST_F(ConsoleTest, UsageSeriesAddsUpToTheUsageReport) {
  startAgent("node-a", "sim:2xA100");
  const auto [alice, mallory] = createTwoTeams("ml", "alice", "cv", "mallory");
  const int64_t id = submit(alice, {"--gpus", "2"}, {"sleep", "1"});
  ASSERT_TRUE(waitForJobState(alice, id, "succeeded"));

  // One window for both, fixed: relative times would move between the two requests.
  const json report = httpRequest(port_, "GET", "/api/v1/usage?from=-1h", "", alice).parsed();
  const std::string from = report.at("from"), to = report.at("to");
  HttpResult r = httpRequest(
      port_, "GET", "/api/v1/usage/series?by=user&step=5m&from=" + from + "&to=" + to, "", alice);
  ASSERT_EQ(r.status, 200) << r.body;
  const json series = r.parsed();
  EXPECT_EQ(series.at("step"), "5m");
  EXPECT_EQ(series.at("step_seconds"), 300);
  EXPECT_EQ(series.at("times").size(), 12u);
  ASSERT_EQ(series.at("series").size(), 1u) << r.body;
  const json& alices = series["series"][0];
  EXPECT_EQ(alices.at("name"), "alice");
  double sum = 0;
  for (const json& v : alices.at("gpu_hours_allocated")) sum += v.get<double>();
  const json total =
      httpRequest(port_, "GET", "/api/v1/usage?by=user&from=" + from + "&to=" + to, "", alice)
          .parsed();
  ASSERT_EQ(total.at("rows").size(), 1u) << total.dump();
  EXPECT_NEAR(sum, total["rows"][0].at("gpu_hours_allocated").get<double>(), 1e-9);
  EXPECT_GT(sum, 0);
  EXPECT_EQ(alices.at("gpu_hours_used").size(), 12u);
  EXPECT_EQ(alices.at("idle_gpu_hours").size(), 12u);

  // The default step keeps a window to at most 100 buckets.
  const json byDefault =
      httpRequest(port_, "GET", "/api/v1/usage/series?from=-7d", "", alice).parsed();
  EXPECT_EQ(byDefault.at("step"), "6h") << byDefault.dump();
  EXPECT_EQ(byDefault.at("times").size(), 28u);

  for (const std::string bad : {"step=1s", "step=fast", "step=1m&from=-30d"}) {
    HttpResult e = httpRequest(port_, "GET", "/api/v1/usage/series?" + bad, "", alice);
    EXPECT_EQ(e.status, 400) << bad << ": " << e.body;
    EXPECT_EQ(e.parsed().at("error").value("field", ""), "step") << bad << ": " << e.body;
  }
  HttpResult badFrom = httpRequest(port_, "GET", "/api/v1/usage/series?from=soon", "", alice);
  EXPECT_EQ(badFrom.status, 400);
  EXPECT_EQ(badFrom.parsed().at("error").value("field", ""), "from");

  // Another team's usage is not there for mallory, as if there were no such team.
  HttpResult other = httpRequest(port_, "GET", "/api/v1/usage/series?team=ml", "", mallory);
  EXPECT_EQ(other.status, 404) << other.body;
  EXPECT_EQ(other.body.find("alice"), std::string::npos);
  HttpResult own = httpRequest(port_, "GET", "/api/v1/usage/series?from=-1h", "", mallory);
  ASSERT_EQ(own.status, 200) << own.body;
  EXPECT_TRUE(own.parsed().at("series").empty()) << own.body;
}

}  // namespace
}  // namespace allot::it

namespace allot::it {
namespace {

TEST_F(ConsoleTest, ClusterMapNamesOnlyTheCallersOwnWork) {
  startAgent("node-a", "sim:4xA100");
  const auto [alice, bob] = createTwoTeams("ml", "alice", "cv", "bob");
  const int64_t id = submit(alice, {"--gpus", "1"}, {"sleep", "300"});
  ASSERT_TRUE(waitForJobState(alice, id, "running"));

  // The GPU alice's job holds, as each of them sees it.
  auto heldGpu = [&](const std::string& token) {
    HttpResult r = httpRequest(port_, "GET", "/api/v1/cluster/map", "", token);
    EXPECT_EQ(r.status, 200) << r.body;
    const json map = r.parsed();
    EXPECT_EQ(map.at("hosts").size(), 1u) << r.body;
    for (const json& g : map["hosts"][0].at("gpus"))
      if (!g.at("holders").empty()) return g;
    return json();
  };
  const json mine = heldGpu(alice);
  ASSERT_FALSE(mine.is_null());
  EXPECT_EQ(mine["holders"][0].at("job_id"), id);
  EXPECT_EQ(mine["holders"][0].at("team"), "ml");
  EXPECT_EQ(mine["holders"][0].at("user"), "alice");
  EXPECT_EQ(mine.at("model"), "A100");
  // Bob sees the GPU busy, and nothing of whose.
  const json theirs = heldGpu(bob);
  ASSERT_FALSE(theirs.is_null());
  EXPECT_TRUE(theirs["holders"][0].at("job_id").is_null());
  EXPECT_TRUE(theirs["holders"][0].at("team").is_null());
  EXPECT_TRUE(theirs["holders"][0].at("user").is_null());
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/cluster/map").status, 401);
}

TEST_F(ConsoleTest, LargeAnswersAreGzippedForClientsThatAskForIt) {
  const std::string target = "/api/v1/openapi.json";  // well over the 8 KB threshold
  HttpResult plain = httpRequest(port_, "GET", target, "", adminToken_);
  ASSERT_EQ(plain.status, 200);
  EXPECT_EQ(plain.headers.count("content-encoding"), 0u);
  HttpResult zipped =
      httpRequest(port_, "GET", target, "", adminToken_, {{"Accept-Encoding", "gzip, br"}});
  ASSERT_EQ(zipped.status, 200);
  EXPECT_EQ(zipped.headers["content-encoding"], "gzip");
  EXPECT_EQ(zipped.headers["vary"], "Accept-Encoding");
  ASSERT_GT(zipped.body.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(zipped.body[0]), 0x1f);
  EXPECT_LT(zipped.body.size() * 4, plain.body.size());
  // Small answers and refusals stay as they are.
  HttpResult small =
      httpRequest(port_, "GET", "/api/v1/whoami", "", adminToken_, {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(small.headers.count("content-encoding"), 0u);
  HttpResult refused =
      httpRequest(port_, "GET", target, "", adminToken_, {{"Accept-Encoding", "gzip;q=0"}});
  EXPECT_EQ(refused.headers.count("content-encoding"), 0u);
}

}  // namespace
}  // namespace allot::it
