// Issue 18, against real processes: one member's flood of huge jobs does not wedge a shared host,
// one job's output does not fill allotd's disk, and a host credential cannot make its host look
// bigger or blow up allotd's memory with its hello. And (issue 19) what such a holder sends that
// does not decode is refused whole, without taking allotd's end of the stream down.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <cstring>
#include <filesystem>
#include <thread>

#include "harness.h"

namespace allot::it {
namespace {

namespace fs = std::filesystem;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = boost::asio::ip::tcp;

constexpr int kFloodLimit = 40;
constexpr int kConnectionsPerClient = 16;

class LimitsTest : public TestCluster {
 protected:
  std::vector<std::string> serverFlags() const override {
    // A user may hold 40 jobs; jobs asking no CPU count as 10 millicpu, so that all 40 fit on
    // this machine's host and its desired state carries 40 jobs of 240 KiB each (over the 8 MiB
    // one message may carry). Logs keep 1 MiB per job.
    // A client may hold 16 connections at once.
    writeFile(path("allotd.toml"),
              "[limits]\nmax_active_jobs_per_user = " + std::to_string(kFloodLimit) +
                  "\njob_cpu_floor_millis = 10\njob_memory_floor_mib = 16\n" +
                  "max_connections_per_client = " + std::to_string(kConnectionsPerClient) + "\n");
    return {"--heartbeat", "1s", "--config", path("allotd.toml"), "--max-log-bytes", "1048576"};
  }

  // POST /jobs with three 80 KiB variables (one variable may not pass 128 KiB in execve).
  HttpResult submitBig(const std::string& token, char fill) {
    json body = {{"command", {"sleep", "600"}}, {"gpus", 0}};
    for (const char* k : {"A", "B", "C"}) body["env"][k] = std::string(80 << 10, fill);
    return httpRequest(port_, "POST", "/api/v1/jobs", body.dump(), token);
  }
  int countInState(const std::string& token, const std::string& state) {
    HttpResult r = httpRequest(port_, "GET", "/api/v1/jobs?limit=1000&state=" + state, "", token);
    json j = r.parsed();
    return j.is_array() ? static_cast<int>(j.size()) : -1;
  }
};

TEST_F(LimitsTest, AFloodOfHugeJobsDoesNotWedgeASharedHost) {
  startAgent("gpu-a", "sim:2xA100");
  const auto [mallory, bob] = createTwoTeams("ml", "mallory", "nlp", "bob");
  // Another team's work on the same host.
  int64_t bobs = submit(bob, {"--gpus", "1"}, {"sleep", "600"});
  ASSERT_TRUE(waitForJobState(bob, bobs, "running"));

  for (int i = 0; i < kFloodLimit; ++i) {
    HttpResult r = submitBig(mallory, static_cast<char>('a' + i % 26));
    ASSERT_EQ(r.status, 201) << r.body;
  }
  HttpResult over = submitBig(mallory, 'z');
  EXPECT_EQ(over.status, 409) << over.body;
  EXPECT_NE(over.body.find("max_active_jobs_per_user"), std::string::npos) << over.body;

  // Every one of them reaches the agent and runs: the desired state came in bounded pieces.
  EXPECT_TRUE(waitFor([&] { return countInState(mallory, "running") == kFloodLimit; },
                      std::chrono::seconds(60)))
      << countInState(mallory, "running") << " of " << kFloodLimit << " running";
  EXPECT_EQ(textOf(host("gpu-a"), "state"), "online");
  // The other team's job still obeys: cancelled, it stops.
  ASSERT_EQ(cli({"job", "cancel", std::to_string(bobs)}).code, 0);
  EXPECT_TRUE(waitForJobState(bob, bobs, "cancelled"));
  // And the flood's owner can end it all.
  json mine = json::parse(
      httpRequest(port_, "GET", "/api/v1/jobs?limit=1000&state=running", "", mallory).body);
  for (const auto& j : mine) {
    HttpResult c = httpRequest(
        port_, "POST", "/api/v1/jobs/" + std::to_string(j.at("id").get<int64_t>()) + "/cancel",
        "{}", mallory);
    EXPECT_EQ(c.status, 200) << c.body;
  }
  EXPECT_TRUE(waitFor([&] { return countInState(mallory, "cancelled") == kFloodLimit; },
                      std::chrono::seconds(60)));
  EXPECT_EQ(submitBig(mallory, 'y').status, 201) << "ended jobs make room again";
}

TEST_F(LimitsTest, AJobsOutputIsCappedKeepingItsHeadAndTail) {
  startAgent("gpu-a", "sim:1xA100");
  createTeam("ml");
  const std::string alice = createUser("alice", "ml");
  // 100 MB of output, then a last line.
  int64_t id = submit(alice, {},
                      {"sh", "-c",
                       "echo FIRST-LINE; head -c 100000000 /dev/zero | tr '\\0' x; echo; "
                       "echo LAST-LINE"});
  ASSERT_TRUE(waitForJobState(alice, id, "succeeded", nullptr));
  const std::string text = logs(alice, id);
  EXPECT_LT(text.size(), 1'100'000u);
  EXPECT_EQ(text.rfind("FIRST-LINE\n", 0), 0u);
  EXPECT_EQ(text.substr(text.size() - 10), "LAST-LINE\n");
  EXPECT_NE(text.find("bytes of output were dropped here"), std::string::npos);
  // What allotd holds on disk is as small.
  uintmax_t stored = 0;
  for (const auto& e : fs::directory_iterator(path("data/logs")))
    stored += fs::is_regular_file(e) ? fs::file_size(e) : 0;
  EXPECT_LT(stored, 1'200'000u);
}

// Attack: a job makes its output a terabyte at once (ftruncate on its stdout: a sparse file, no
// disk taken) and sleeps. Before the agent shipped at most 1 MiB of a job's output a pass and
// skipped what allotd's cap drops (model::LogKeep), it tried to ship the terabyte: no status went
// out meanwhile, the host turned unreachable and every tenant's jobs on it were lost.
TEST_F(LimitsTest, AJobsTerabyteOfOutputNeitherHoldsItsHostNorItsOwnEnd) {
  startAgent("gpu-a", "sim:2xA100");
  const auto [mallory, bob] = createTwoTeams("ml", "mallory", "nlp", "bob");
  const int64_t flood =
      submit(mallory, {"--gpus", "1"},
             {"python3", "-c", "import os, time; os.ftruncate(1, 1 << 40); time.sleep(600)"});
  ASSERT_TRUE(waitForJobState(mallory, flood, "running"));
  // Another team's job on the same host starts, ends and is reported meanwhile.
  const int64_t bobs = submit(bob, {"--gpus", "1"}, {"true"});
  ASSERT_TRUE(waitForJobState(bob, bobs, "succeeded", nullptr));
  EXPECT_EQ(textOf(host("gpu-a"), "state"), "online");
  // The flood's own end is heard too, not held back behind a terabyte still to ship.
  ASSERT_EQ(cliAs(mallory, {"job", "cancel", std::to_string(flood)}).code, 0);
  EXPECT_TRUE(waitForJobState(mallory, flood, "cancelled"));
  EXPECT_LT(logs(mallory, flood).size(), 1'100'000u);

  // The last line after a terabyte is still the log's last line.
  const int64_t tail = submit(
      mallory, {"--gpus", "1"},
      {"python3", "-c", "import os; os.ftruncate(1, 1 << 40); os.write(1, b'\\nLAST-LINE\\n')"});
  ASSERT_TRUE(waitForJobState(mallory, tail, "succeeded", nullptr));
  const std::string text = logs(mallory, tail);
  EXPECT_LT(text.size(), 1'100'000u);
  EXPECT_EQ(text.substr(text.size() - 10), "LAST-LINE\n");
  EXPECT_NE(text.find("bytes of output were dropped here"), std::string::npos);
}

// The agent stream as a host credential holder speaks it.
class HostStream {
 public:
  HostStream(uint16_t port, const std::string& credential) : ws_(io_) {
    ws_.next_layer().connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    ws_.set_option(websocket::stream_base::decorator([credential](websocket::request_type& req) {
      req.set(beast::http::field::authorization, "Bearer " + credential);
    }));
    ws_.handshake("127.0.0.1:" + std::to_string(port), "/api/v1/agent/stream");
  }
  // False when allotd has closed the stream.
  bool send(const std::string& text) {
    beast::error_code ec;
    ws_.text(true);
    ws_.write(boost::asio::buffer(text), ec);
    return !ec;
  }
  // True when allotd closes the stream within `within` (what it sends until then is read and
  // dropped); false when it is still open then.
  bool closedByServer(std::chrono::seconds within = std::chrono::seconds(10)) {
    timeval tv{static_cast<time_t>(within.count()), 0};
    ::setsockopt(ws_.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (;;) {
      beast::flat_buffer buf;
      beast::error_code ec;
      ws_.read(buf, ec);
      if (!ec) continue;
      return ec != boost::asio::error::would_block && ec != boost::asio::error::try_again;
    }
  }

 private:
  boost::asio::io_context io_;
  websocket::stream<tcp::socket> ws_;
};

json helloWith(int gpus, const std::string& model) {
  json inv = {{"hostname", "gpu-a"},    {"cpus", 4},
              {"memory_mib", 16384},    {"gpus", json::array()},
              {"gpu_provider", "nvml"}, {"simulated", false}};
  for (int i = 0; i < gpus; ++i)
    inv["gpus"].push_back({{"index", i},
                           {"uuid", "GPU-forged-" + std::to_string(i)},
                           {"minor", i % 4096},
                           {"model", model},
                           {"memory_mib", 81559}});
  return {{"type", "hello"}, {"inventory", inv}, {"jobs", json::array()}};
}

TEST_F(LimitsTest, AForgedHelloCannotEnlargeAHostOrAllotdsMemory) {
  startAgent("gpu-a", "sim:2xA100");
  createTeam("nlp");
  const std::string bob = createUser("bob", "nlp");
  const json credential = json::parse(readFile(path("agents/gpu-a/credential.json")));
  killAgent("gpu-a");

  {
    // The host claims 16 H100s now: fenced for review, and no one's 8-GPU job goes there.
    HostStream forged(port_, credential.at("token").get<std::string>());
    ASSERT_TRUE(forged.send(helloWith(16, "NVIDIA H100 80GB HBM3").dump()));
    json seen;
    ASSERT_TRUE(waitFor([&] {
      seen = host("gpu-a");
      return textOf(seen, "admin_state") == "maintenance";
    })) << seen.dump();
    EXPECT_NE(textOf(seen, "admin_reason").find("inventory changed"), std::string::npos)
        << seen.dump();
    int64_t big = submit(bob, {"--gpus", "8"}, {"sleep", "600"});
    std::this_thread::sleep_for(std::chrono::seconds(2));
    EXPECT_EQ(textOf(job(bob, big), "state"), "queued");
  }
  {
    // 150,000 GPUs, a 14 MB frame: refused before it is parsed.
    HostStream forged(port_, credential.at("token").get<std::string>());
    (void)forged.send(helloWith(150'000, "H100").dump());
  }
  ASSERT_TRUE(serverRunning());
  HttpResult hosts = httpRequest(port_, "GET", "/api/v1/hosts", "", adminToken_);
  EXPECT_EQ(hosts.status, 200);
  EXPECT_LT(hosts.body.size(), 64u << 10);
}

// A connection to allotd from 127.0.0.N (N 2 by default), another client than the harness's
// 127.0.0.1; -1 on failure.
int connectFrom127002(uint16_t port, uint8_t lastByte = 2) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{}, to{};
  from.sin_family = to.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(0x7f000000u | lastByte);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(port);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

// Whether allotd answers a request on `fd` (kept open afterwards, as keep-alive allows). One that
// allotd closed unanswered reads as end of stream or a reset.
bool answers(int fd) {
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: allot\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) return false;
  char head[16] = {};
  const ssize_t n = ::recv(fd, head, sizeof head - 1, 0);
  if (n <= 0) return false;
  // Drain the rest of this small reply, so the next request's answer starts fresh.
  char rest[4096];
  while (::recv(fd, rest, sizeof rest, MSG_DONTWAIT) > 0) {
  }
  return std::string(head, static_cast<size_t>(n)).rfind("HTTP/1.1 200", 0) == 0;
}

// Attack, unauthenticated: one client opens every connection it may and holds them (idle
// connections cost it nothing). The next is closed unanswered; other clients, and the agent
// connected before, are still served; and once the client lets go, its places come back. Without
// the limit such a client took every descriptor allotd had, and the accept loop then spun.
TEST_F(LimitsTest, OneClientHoldingEveryConnectionItMayLeavesOthersServed) {
  startAgent("gpu-a", "sim:2xA100");
  std::vector<int> held;
  int refusedAt = -1;
  for (int i = 0; i < kConnectionsPerClient + 4 && refusedAt < 0; ++i) {
    const int fd = connectFrom127002(port_);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    if (answers(fd)) {
      held.push_back(fd);
    } else {
      refusedAt = i;
      ::close(fd);
    }
  }
  EXPECT_EQ(refusedAt, kConnectionsPerClient);
  HttpResult hosts = httpRequest(port_, "GET", "/api/v1/hosts", "", adminToken_);
  EXPECT_EQ(hosts.status, 200) << "another client is served";
  EXPECT_TRUE(waitForHostState("gpu-a", "online"));
  ASSERT_FALSE(held.empty());
  EXPECT_TRUE(answers(held.front())) << "the connections admitted keep being served";
  for (int fd : held) ::close(fd);
  EXPECT_TRUE(waitFor([&] {
    const int fd = connectFrom127002(port_);
    const bool ok = fd >= 0 && answers(fd);
    if (fd >= 0) ::close(fd);
    return ok;
  })) << "the client's places come back as its connections end";
  HttpResult metrics = httpRequest(port_, "GET", "/metrics", "", adminToken_);
  EXPECT_NE(metrics.body.find("allot_connections_refused_total "), std::string::npos);
  EXPECT_EQ(metrics.body.find("allot_connections_refused_total 0\n"), std::string::npos);
}

class ConnectionTotalTest : public TestCluster {
 protected:
  static constexpr int kTotal = 24;
  std::vector<std::string> serverFlags() const override {
    writeFile(path("allotd.toml"), "[limits]\nmax_connections = " + std::to_string(kTotal) +
                                       "\nmax_connections_per_client = 16\n");
    return {"--heartbeat", "1s", "--config", path("allotd.toml")};
  }
};

// Whether allotd closed `fd` (end of stream or a reset), without waiting.
bool closedByPeer(int fd) {
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// Attack, unauthenticated: three clients, each under its own limit, together open more
// connections than allotd may hold, and send nothing on them. Before, once they held every place,
// each new connection from anyone (the CLI, the console, an agent reconnecting) was closed
// unanswered until they let go. Now a new connection closes the one idle longest, and the agent's
// stream, which is in use, is never closed for another.
TEST_F(ConnectionTotalTest, ClientsHoldingEveryConnectionTogetherCannotKeepOthersOut) {
  startAgent("gpu-a", "sim:2xA100");
  ASSERT_TRUE(waitForHostState("gpu-a", "online"));
  std::vector<int> held;
  for (int i = 0; i < kTotal + 6; ++i) {
    const int fd = connectFrom127002(port_, static_cast<uint8_t>(2 + i % 3));
    ASSERT_GE(fd, 0) << std::strerror(errno);
    held.push_back(fd);
  }
  // allotd has taken them all once the ones over the total are closed (with the agent's stream,
  // seven); which ones were is allotd's choice.
  EXPECT_TRUE(waitFor([&] { return std::count_if(held.begin(), held.end(), closedByPeer) >= 7; }));
  HttpResult hosts = httpRequest(port_, "GET", "/api/v1/hosts", "", adminToken_);
  EXPECT_EQ(hosts.status, 200) << "a new client is served: " << hosts.body;
  EXPECT_NE(hosts.body.find("\"online\""), std::string::npos) << "the agent's stream was kept";
  EXPECT_TRUE(closedByPeer(held.front())) << "the connection idle longest made room";
  HttpResult metrics = httpRequest(port_, "GET", "/metrics", "", adminToken_);
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.body.find("allot_idle_connections_closed_total 0\n"), std::string::npos);
  EXPECT_NE(metrics.body.find("allot_idle_connections_closed_total "), std::string::npos);
  for (int fd : held) ::close(fd);
}

// Attack: a valid token that may not open session 999 (there is none) announces a 100 MiB body
// to it. Bodies past the API's 1 MiB limit are for those who may open the session they are sent
// to (a notebook saved with its outputs); anyone else is refused before allotd reads a byte of
// it, not after buffering it. Before, any valid token made allotd read up to 256 MiB per
// connection.
TEST_F(LimitsTest, OnlyThoseWhoMayOpenASessionSendItLargeBodies) {
  createTeam("nlp");
  const std::string bob = createUser("bob", "nlp");
  const int fd = connectFrom127002(port_);
  ASSERT_GE(fd, 0);
  const timeval bound{.tv_sec = 30, .tv_usec = 0};  // bounds a failure only
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  const std::string header =
      "PUT /sessions/999/api/contents/big.ipynb HTTP/1.1\r\nHost: allot\r\n"
      "Authorization: Bearer " +
      bob + "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(100 << 20) +
      "\r\n\r\n";
  ASSERT_GT(::send(fd, header.data(), header.size(), MSG_NOSIGNAL), 0);
  char head[32] = {};
  const ssize_t n = ::recv(fd, head, sizeof head - 1, 0);
  ::close(fd);
  ASSERT_GT(n, 0) << "no answer before the body: allotd was reading it";
  EXPECT_EQ(std::string(head, 12), "HTTP/1.1 413");
}

// Attack, unauthenticated: a chunked body whose chunk line never ends ("1;" and then extension
// bytes without end), and one whose trailer never does. Beast checks those lines only once they
// have ended, and the connection's buffer had no bound, so allotd buffered whatever came, for as
// long as its idle timeout let the connection live. It now holds a header and one read at most,
// and closes the connection; other clients are served throughout.
TEST_F(LimitsTest, AChunkLineThatNeverEndsIsNotBuffered) {
  for (const char* endless : {"1;", "0\r\nX-Trailer: "}) {
    const int fd = connectFrom127002(port_);
    ASSERT_GE(fd, 0);
    const timeval bound{.tv_sec = 30, .tv_usec = 0};  // bounds a failure only
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
    const std::string header =
        "POST /api/v1/jobs HTTP/1.1\r\nHost: allot\r\nTransfer-Encoding: chunked\r\n\r\n" +
        std::string(endless);
    ASSERT_GT(::send(fd, header.data(), header.size(), MSG_NOSIGNAL), 0);
    const std::string filler(64 << 10, 'x');
    size_t sent = 0;
    constexpr size_t kTried = 64 << 20;  // far past what the buffer, and the socket's, may hold
    while (sent < kTried) {
      const ssize_t n = ::send(fd, filler.data(), filler.size(), MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    ::close(fd);
    EXPECT_LT(sent, kTried) << endless << ": allotd kept reading a line that never ends";
    HttpResult hosts = httpRequest(port_, "GET", "/api/v1/hosts", "", adminToken_);
    EXPECT_EQ(hosts.status, 200) << "allotd serves on";
  }
}

// Bad input, unauthenticated: what cannot be read as HTTP gets a 400 whose JSON names the part,
// not a silent close; a body past the limit a 413 that names the body.
TEST_F(LimitsTest, UnreadableRequestsAreAnsweredNamingThePart) {
  auto answerTo = [&](const std::string& request) {
    const int fd = connectFrom127002(port_);
    if (fd < 0) return std::string("no connection");
    const timeval bound{.tv_sec = 30, .tv_usec = 0};  // bounds a failure only
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
    ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string reply;
    char chunk[4096];
    for (ssize_t n; (n = ::recv(fd, chunk, sizeof chunk, 0)) > 0;)
      reply.append(chunk, static_cast<size_t>(n));
    ::close(fd);
    return reply;
  };
  const std::string badLine = answerTo("GET / HTTP/9\r\n\r\n");
  EXPECT_EQ(badLine.rfind("HTTP/1.1 400", 0), 0u) << badLine;
  EXPECT_NE(badLine.find(R"("field":"header")"), std::string::npos) << badLine;
  const std::string badChunk = answerTo(
      "POST /api/v1/jobs HTTP/1.1\r\nHost: allot\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
  EXPECT_EQ(badChunk.rfind("HTTP/1.1 400", 0), 0u) << badChunk;
  EXPECT_NE(badChunk.find(R"("field":"body")"), std::string::npos) << badChunk;
  const std::string tooLarge =
      answerTo("POST /api/v1/jobs HTTP/1.1\r\nHost: allot\r\nContent-Length: 104857600\r\n\r\n");
  EXPECT_EQ(tooLarge.rfind("HTTP/1.1 413", 0), 0u) << tooLarge;
  EXPECT_NE(tooLarge.find(R"("field":"body")"), std::string::npos) << tooLarge;
}

// A tenant must not be able to crash allotd by filling its disk: a failed commit is fatal to it
// (memory would otherwise serve what the disk does not hold). Below limits.write_disk_reserve_mib
// of free disk, changes through the API are refused with a 503 that says why, and reads go on.
// The reserve here is larger than any disk, so the disk is "nearly full" from the start.
class WriteReserveTest : public TestCluster {
 protected:
  std::vector<std::string> serverFlags() const override {
    writeFile(path("allotd.toml"), "[limits]\nwrite_disk_reserve_mib = 1073741824\n");
    return {"--config", path("allotd.toml")};
  }
};

TEST_F(WriteReserveTest, ChangesThroughTheApiAreRefusedWhileTheDiskIsUnderTheReserve) {
  const json job = {{"command", {"true"}}, {"gpus", 0}};
  HttpResult submitted = httpRequest(port_, "POST", "/api/v1/jobs", job.dump(), adminToken_);
  EXPECT_EQ(submitted.status, 503) << submitted.body;
  EXPECT_NE(submitted.body.find("nearly full"), std::string::npos) << submitted.body;
  HttpResult team = httpRequest(port_, "POST", "/api/v1/teams", R"({"name":"nlp"})", adminToken_);
  EXPECT_EQ(team.status, 503) << team.body;
  HttpResult jobs = httpRequest(port_, "GET", "/api/v1/jobs", "", adminToken_);
  EXPECT_EQ(jobs.status, 200) << "reads go on";
  EXPECT_EQ(jobs.parsed(), json::array()) << "nothing was changed";
}

// What a host credential's holder sends is read whole or refused whole (protocol/agent_messages.h):
// a hello allotd cannot read closes the stream, and any other frame it cannot read is dropped,
// leaving the stream, and allotd, serving.
TEST_F(LimitsTest, AgentMessagesThatDoNotDecodeAreRefusedWhole) {
  startAgent("gpu-a", "sim:2xA100");
  const json credential = json::parse(readFile(path("agents/gpu-a/credential.json")));
  const std::string token = credential.at("token").get<std::string>();
  killAgent("gpu-a");
  {
    HostStream forged(port_, token);
    json hello = helloWith(2, "A100");
    hello["jobs"] = json::array({{{"id", "one"}, {"state", "running"}}});
    ASSERT_TRUE(forged.send(hello.dump()));
    EXPECT_TRUE(forged.closedByServer());
  }
  HostStream forged(port_, token);
  ASSERT_TRUE(forged.send(helloWith(2, "A100").dump()));
  for (const char* text :
       {R"({"type":5})", R"({"type":null})", R"([1,2])", R"({"type":"status"})",
        R"({"type":"status","jobs":[{"id":{}}]})", R"({"type":"status","jobs":[null]})",
        R"({"type":"telemetry","gpus":7})", R"({"type":"task_result","task":[]})",
        R"({"type":"task_output","task":"x"})", R"({"type":"no-such-type"})"})
    ASSERT_TRUE(forged.send(text)) << text;
  // A good report after them is still heard on the same stream: its count reaches the metric.
  ASSERT_TRUE(forged.send(
      json{{"type", "status"}, {"jobs", json::array()}, {"refused_desired", 7}}.dump()));
  EXPECT_TRUE(waitFor([&] {
    HttpResult m = httpRequest(port_, "GET", "/metrics", "", adminToken_);
    return m.body.find("allot_agent_desired_refused_total{host=\"gpu-a\"} 7") != std::string::npos;
  }));
  ASSERT_TRUE(serverRunning());
}

// Attack, a host credential's holder: reports about another host's job, thousands in one
// message. Each was a line in allotd's log, so a host could fill allotd's disk with them; they
// are throttled now (one each 10 s), and the job on the other host is left as it was.
TEST_F(LimitsTest, ReportsAboutOtherHostsJobsDoNotFloodTheLog) {
  startAgent("gpu-b", "sim:2xA100");
  createTeam("ml");
  const std::string alice = createUser("alice", "ml");
  const int64_t id = submit(alice, {"--gpus", "1"}, {"sleep", "600"});
  ASSERT_TRUE(waitForJobState(alice, id, "running"));
  startAgent("gpu-a", "sim:2xA100");
  const json credential = json::parse(readFile(path("agents/gpu-a/credential.json")));
  killAgent("gpu-a");
  HostStream forged(port_, credential.at("token").get<std::string>());
  ASSERT_TRUE(forged.send(helloWith(2, "A100").dump()));
  json jobs = json::array();
  for (int i = 0; i < 5000; ++i)
    jobs.push_back({{"id", id}, {"state", "exited"}, {"exit_code", 1}});
  for (int round = 0; round < 4; ++round)
    ASSERT_TRUE(forged.send(json{{"type", "status"}, {"jobs", jobs}}.dump()));
  // Heard: a good report after them reaches the metric.
  ASSERT_TRUE(forged.send(
      json{{"type", "status"}, {"jobs", json::array()}, {"refused_desired", 3}}.dump()));
  ASSERT_TRUE(waitFor([&] {
    HttpResult m = httpRequest(port_, "GET", "/metrics", "", adminToken_);
    return m.body.find("allot_agent_desired_refused_total{host=\"gpu-a\"} 3") != std::string::npos;
  }));
  const std::string log = readFile(path("proc/allotd.1.err"));
  size_t lines = 0;
  for (size_t at = log.find("agent report ignored"); at != std::string::npos;
       at = log.find("agent report ignored", at + 1))
    ++lines;
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 2u) << "20,000 reports";
  EXPECT_EQ(textOf(job(alice, id), "state"), "running");
}

// Attack, a host credential's holder: hellos one after another on one stream. Each committed the
// host and pushed its whole desired state (a review); a second one now ends the connection.
TEST_F(LimitsTest, ASecondHelloOnOneStreamEndsIt) {
  startAgent("gpu-a", "sim:2xA100");
  const json credential = json::parse(readFile(path("agents/gpu-a/credential.json")));
  killAgent("gpu-a");
  HostStream forged(port_, credential.at("token").get<std::string>());
  ASSERT_TRUE(forged.send(helloWith(2, "A100").dump()));
  ASSERT_TRUE(waitForHostState("gpu-a", "online"));
  (void)forged.send(helloWith(2, "A100").dump());
  EXPECT_TRUE(forged.closedByServer());
  ASSERT_TRUE(serverRunning());
}

}  // namespace
}  // namespace allot::it
