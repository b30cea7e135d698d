// Idle allocations end to end: real allotd and agent with simulated utilisation, a team policy
// that reclaims, a project policy that only notifies, and a webhook received by a small HTTP
// server this test runs on loopback. Bad policy and event input is refused with the field named.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <thread>

#include "harness.h"
#include "refusals.h"

namespace allot::it {
namespace {

// Accepts HTTP requests on an OS-chosen loopback port, answers 200, keeps each body with its
// request line.
class WebhookReceiver {
 public:
  WebhookReceiver() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd_, 16) != 0)
      throw std::runtime_error("webhook receiver: cannot listen");
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~WebhookReceiver() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  std::vector<std::pair<std::string, json>> received() {
    std::lock_guard lock(mu_);
    return received_;
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      timeval tv{5, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::string data;
      char buf[4096];
      size_t headerEnd = std::string::npos, need = 0;
      for (;;) {
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        data.append(buf, static_cast<size_t>(n));
        if (headerEnd == std::string::npos &&
            (headerEnd = data.find("\r\n\r\n")) != std::string::npos) {
          std::string lower = data.substr(0, headerEnd);
          for (auto& ch : lower) ch = static_cast<char>(std::tolower(ch));
          auto cl = lower.find("content-length:");
          need = cl == std::string::npos ? 0 : std::stoul(lower.substr(cl + 15));
        }
        if (headerEnd != std::string::npos && data.size() >= headerEnd + 4 + need) break;
      }
      if (headerEnd != std::string::npos) {
        std::lock_guard lock(mu_);
        received_.emplace_back(data.substr(0, data.find("\r\n")),
                               json::parse(data.substr(headerEnd + 4), nullptr, false));
      }
      const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      (void)!::send(c, ok.data(), ok.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::pair<std::string, json>> received_;
};

class IdleTest : public TestCluster {
 protected:
  std::vector<std::string> agentFlags() const override { return {"--telemetry-interval", "1s"}; }
  // Webhooks may go only where platform admins allow: this receiver's /hooks/.
  std::vector<std::string> serverFlags() const override {
    writeFile(path("allotd.toml"), "[idle]\nwebhook_allow = [\"http://127.0.0.1:" +
                                       std::to_string(hook_.port()) + "/hooks/\"]\n");
    return {"--heartbeat", "1s", "--config", path("allotd.toml")};
  }
  WebhookReceiver hook_;  // before SetUp, so that the config can name its port

  json events(const std::string& token, int64_t job) {
    return cliJson(token, {"events", "--job", std::to_string(job)});
  }
  static bool hasKind(const json& events, const std::string& kind) {
    for (const auto& e : events) {
      if (textOf(e, "kind") == kind) return true;
    }
    return false;
  }
};

TEST_F(IdleTest, IdleJobsAreFlaggedReclaimedAndClearedWhenBusyAgain) {
  WebhookReceiver& hook = hook_;
  startAgent("node-a", "sim:4xA100");
  createTeam("ml");
  const std::string alice = createUser("alice", "ml");
  ASSERT_EQ(
      cliJson(adminToken_, {"project", "create", "notebooks", "--team", "ml"}).value("team", ""),
      "ml");
  const std::string url = "http://127.0.0.1:" + std::to_string(hook.port()) + "/hooks/s3cret";
  auto set = cli({"team", "idle-policy", "set", "ml", "--threshold", "10", "--after", "3s",
                  "--action", "reclaim", "--grace", "2s", "--webhook", url});
  ASSERT_EQ(set.code, 0) << set.describe();
  // The notebooks project is told, never reclaimed.
  set = cli({"team", "idle-policy", "set", "ml", "--project", "notebooks", "--action", "notify"});
  ASSERT_EQ(set.code, 0) << set.describe();
  json shown = cliJson(alice, {"team", "idle-policy", "show", "ml", "--project", "notebooks"});
  EXPECT_EQ(shown.value("source", ""), "project") << shown.dump();
  EXPECT_EQ(shown.value("after", ""), "3s") << shown.dump();
  EXPECT_TRUE(shown["webhook"].is_null()) << "a member must not see the URL: " << shown.dump();
  EXPECT_TRUE(shown.value("webhook_set", false)) << shown.dump();

  const std::vector<std::string> sleeper = {"sh", "-c",
                                            "echo \"$ALLOT_SIM_GPU_UTIL_FILE\"; sleep 600"};
  int64_t busy = submit(alice, {"--gpus", "1", "--env", "ALLOT_SIM_GPU_UTIL=80"}, sleeper);
  int64_t idle =
      submit(alice, {"--gpus", "1", "--preemptible", "--env", "ALLOT_SIM_GPU_UTIL=0"}, sleeper);
  int64_t notebook = submit(
      alice, {"--gpus", "1", "--project", "notebooks", "--env", "ALLOT_SIM_GPU_UTIL=0"}, sleeper);
  for (int64_t id : {busy, idle, notebook}) ASSERT_TRUE(waitForJobState(alice, id, "running"));

  // The idle job is flagged: the owner's view, the event, the webhook.
  json j;
  ASSERT_TRUE(waitFor([&] { return (j = job(alice, idle)).contains("idle"); })) << j.dump(2);
  EXPECT_TRUE(j["idle"]["since"].is_string()) << j.dump(2);
  EXPECT_TRUE(j["idle"]["reclaim_at"].is_string()) << j.dump(2);
  json ev = events(alice, idle);
  EXPECT_TRUE(hasKind(ev, "allocation_idle")) << ev.dump(2);
  // Then reclaimed after the grace, and requeued: it is preemptible.
  ASSERT_TRUE(waitFor([&] { return hasKind(ev = events(alice, idle), "allocation_reclaimed"); }))
      << ev.dump(2);
  ASSERT_TRUE(waitFor([&] { return (j = job(alice, idle)).value("preemptions", 0) >= 1; }))
      << j.dump(2);
  EXPECT_NE(j.value("state", ""), "preempted") << j.dump(2);
  // The webhook heard both, on the path given, as event JSON.
  std::vector<std::pair<std::string, json>> got;
  ASSERT_TRUE(waitFor([&] {
    got = hook.received();
    int kinds = 0;
    for (const auto& [line, body] : got) {
      if (body.is_object() && body.value("job", int64_t{0}) == idle)
        kinds |= textOf(body, "kind") == "allocation_idle"        ? 1
                 : textOf(body, "kind") == "allocation_reclaimed" ? 2
                                                                  : 0;
    }
    return kinds == 3;
  })) << got.size()
      << " webhook calls";
  EXPECT_EQ(got.front().first, "POST /hooks/s3cret HTTP/1.1");

  // The notebook job is flagged but kept, and listed by the usage report as idle.
  ASSERT_TRUE(waitFor([&] { return (j = job(alice, notebook)).contains("idle"); })) << j.dump(2);
  EXPECT_TRUE(j["idle"]["reclaim_at"].is_null()) << j.dump(2);
  json report = cliJson(alice, {"report", "usage", "--by", "team"});
  bool listed = false;
  for (const auto& a : report.value("idle_allocations", json::array()))
    listed = listed || a.value("job", int64_t{0}) == notebook;
  EXPECT_TRUE(listed) << report.dump(2);
  // Busy again once it uses its GPU.
  std::string file = trim(logs(alice, notebook));
  ASSERT_FALSE(file.empty());
  std::ofstream(file) << "90\n";
  ASSERT_TRUE(waitFor([&] {
    return hasKind(ev = events(alice, notebook), "allocation_busy_again");
  })) << ev.dump(2);
  EXPECT_FALSE(job(alice, notebook).contains("idle"));
  EXPECT_EQ(job(alice, notebook).value("state", ""), "running");

  // The busy job ran as long as the others and was never flagged.
  EXPECT_TRUE(events(alice, busy).empty()) << events(alice, busy).dump(2);
  EXPECT_EQ(job(alice, busy).value("state", ""), "running");

  // Another team sees none of it.
  createTeam("cv");
  const std::string carol = createUser("carol", "cv");
  EXPECT_TRUE(cliJson(carol, {"events"}).empty());
}

TEST_F(IdleTest, BadPolicyAndEventInputIsRefusedWithTheFieldNamed) {
  const auto [alice, carol] = createTwoTeams("ml", "alice", "cv", "carol");
  ASSERT_EQ(cliJson(adminToken_, {"project", "create", "p1", "--team", "ml"}).value("team", ""),
            "ml");
  const std::string admin = adminToken_;
  const std::string team = "/api/v1/teams/ml/idle-policy";
  const std::string project = "/api/v1/teams/ml/projects/p1/idle-policy";
  const std::vector<RefusedRequest> cases = {
      {"PUT", team, R"({"threshold_percent":150})", admin, 400, "threshold_percent"},
      {"PUT", team, R"({"threshold_percent":-1})", admin, 400, "threshold_percent"},
      {"PUT", team, R"({"threshold_percent":"ten"})", admin, 400, "threshold_percent"},
      {"PUT", team, R"({"after":"soon"})", admin, 400, "after"},
      {"PUT", team, R"({"after":"0s"})", admin, 400, "after"},
      {"PUT", team, R"({"grace":"-5m"})", admin, 400, "grace"},
      {"PUT", team, R"({"action":"delete"})", admin, 400, "action"},
      {"PUT", team, R"({"webhook":"ftp://example.com/x"})", admin, 400, "webhook"},
      {"PUT", team, R"({"webhook":"https://example.com/x"})", admin, 400, "webhook"},
      // allotd's own routes, or anything else the allow-list leaves out (issue 18).
      {"PUT", team,
       R"({"webhook":"http://127.0.0.1:)" + std::to_string(port_) + R"(/api/v1/jobs"})", admin, 400,
       "webhook"},
      {"PUT", team, R"({"webhook":"http://example.com/hooks/x"})", admin, 400, "webhook"},
      {"PUT", team, R"({"thresold_pct":5})", admin, 400, "thresold_pct"},
      {"PUT", project, R"({"action":"sometimes"})", admin, 400, "action"},
      {"PUT", team, R"({"threshold_percent":10})", alice, 403, ""},
      {"DELETE", project, "", alice, 403, ""},
      {"GET", team, "", carol, 404, ""},
      {"PUT", team, R"({"threshold_percent":10})", carol, 404, ""},
      {"GET", project, "", carol, 404, ""},
      {"GET", "/api/v1/teams/ml/projects/nope/idle-policy", "", admin, 404, ""},
      {"GET", "/api/v1/teams/nope/idle-policy", "", admin, 404, ""},
      {"GET", "/api/v1/events?kind=exploded", "", alice, 400, "kind"},
      {"GET", "/api/v1/events?limit=0", "", alice, 400, "limit"},
      {"GET", "/api/v1/events?since=yesterday-ish", "", alice, 400, "since"},
      {"GET", "/api/v1/events?job=x", "", alice, 400, "job"},
      {"GET", "/api/v1/events?team=ml", "", carol, 404, ""},
  };
  expectRefused(port_, cases);
  // Nothing was set: both still follow the platform's default.
  for (const auto& target : {team, project}) {
    json p = httpRequest(port_, "GET", target, "", admin).parsed();
    EXPECT_EQ(p.value("source", ""), "platform") << p.dump();
    EXPECT_EQ(p.value("threshold_percent", 0.0), 5.0) << p.dump();
  }
  // The CLI says what is wrong, and exits non-zero.
  auto r = cli({"team", "idle-policy", "set", "ml", "--after", "soon"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("after"), std::string::npos) << r.describe();
}

}  // namespace
}  // namespace allot::it
