// Version skew between allotd and an agent: a desired state the agent cannot decode is refused
// whole and loudly, and the agent keeps running what it runs. A real agent with a running job;
// its allotd is killed and a stand-in takes its port, speaking the agent protocol with a job
// entry this agent cannot read (as a newer allotd might send); then the real allotd comes back.

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <thread>
#include <utility>  // before Boost.Asio (GCC 12)

#include "harness.h"

namespace allot::it {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

// Accepts one agent stream on 127.0.0.1:port, reads its hello, sends `desired`, and keeps reading
// until a status reports `refused_desired` >= 1 or `timeout` passes. The count, or -1.
class SkewedServer {
 public:
  SkewedServer(uint16_t port, std::string desired) : desired_(std::move(desired)) {
    acceptor_.open(tcp::v4());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind({asio::ip::make_address("127.0.0.1"), port});
    acceptor_.listen();
    thread_ = std::thread([this] { serve(); });
  }
  ~SkewedServer() {
    stop_ = true;
    // A read blocked on a silent agent returns once its socket is shut down.
    if (int fd = fd_.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
    // So does an accept() no agent came to: close() alone would leave it blocked.
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    beast::error_code ec;
    acceptor_.close(ec);
    if (thread_.joinable()) thread_.join();
  }
  int64_t refusedSeen() const { return refused_; }
  bool helloSeen() const { return hello_; }

 private:
  void serve() {
    try {
      tcp::socket socket(io_);
      acceptor_.accept(socket);
      socket.set_option(tcp::no_delay(true));
      beast::flat_buffer buf;
      beast::http::request<beast::http::string_body> req;
      beast::http::read(socket, buf, req);
      websocket::stream<tcp::socket> ws(std::move(socket));
      ws.accept(req);
      fd_ = ws.next_layer().native_handle();
      while (!stop_) {
        beast::flat_buffer in;
        ws.read(in);
        if (!ws.got_text()) continue;  // output frames
        auto msg = json::parse(beast::buffers_to_string(in.data()), nullptr, false);
        if (!msg.is_object()) continue;
        const std::string type = msg.value("type", "");
        if (type == "hello") {
          hello_ = true;
          ws.text(true);
          ws.write(asio::buffer(desired_));
        } else if (type == "status") {
          refused_ = msg.value("refused_desired", int64_t{0});
          if (refused_ >= 1) break;
        }
      }
      ws.close(websocket::close_code::going_away);
    } catch (const std::exception&) {
      // The test's checks say what went wrong; a closed acceptor lands here too.
    }
  }

  std::string desired_;
  asio::io_context io_;
  tcp::acceptor acceptor_{io_};
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> fd_{-1};
  std::atomic<bool> hello_{false};
  std::atomic<int64_t> refused_{-1};
};

class AgentSkewTest : public TestCluster {};

TEST_F(AgentSkewTest, AnUndecodableDesiredStateIsRefusedAndRunningWorkKeepsRunning) {
  startAgent("skewed", "sim:2xA100");
  createTeam("ml");
  std::string erin = createUser("erin", "ml");
  const std::string ticks = path("ticks");
  const int64_t id =
      submit(erin, {"--gpus", "1"},
             {"sh", "-c", "while true; do echo tick >> " + ticks + "; sleep 0.1; done"});
  ASSERT_TRUE(waitForJobState(erin, id, "running"));
  ASSERT_TRUE(waitFor([&] { return !readFile(ticks).empty(); }));

  killServer();
  {
    // What a newer allotd might send: the running job's own entry in a shape this agent cannot
    // read (a list it has as a string, no command), and a field it does not know. Decoded in
    // part, the message would leave the job out, and the agent would stop it as not wanted.
    const std::string desired = R"({"type":"desired","heartbeat_ms":200,"jobs":[{"id":)" +
                                std::to_string(id) +
                                R"(,"gpu_indices":"0"}],"newer_field":{"x":1}})";
    SkewedServer skewed(port_, desired);
    ASSERT_TRUE(waitFor([&] { return skewed.refusedSeen() >= 1; }))
        << "the agent never reported the refusal; hello seen: " << skewed.helloSeen();
    EXPECT_EQ(skewed.refusedSeen(), 1);
  }
  // The job went on through the refusal: its output still grows.
  const size_t before = readFile(ticks).size();
  ASSERT_TRUE(waitFor([&] { return readFile(ticks).size() > before; }));

  startServer();
  ASSERT_TRUE(waitForHostState("skewed", "online"));
  json j = job(erin, id);
  EXPECT_EQ(textOf(j, "state"), "running") << j.dump();
  // allotd hears of the refusal with the agent's next status, and shows it as a metric.
  ASSERT_TRUE(waitFor([&] {
    auto metrics = httpRequest(port_, "GET", "/metrics", "", adminToken_);
    return metrics.body.find("allot_agent_desired_refused_total{host=\"skewed\"} 1") !=
           std::string::npos;
  })) << httpRequest(port_, "GET", "/metrics", "", adminToken_).body;
}

}  // namespace
}  // namespace allot::it
