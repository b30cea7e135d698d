// One member (or one host credential) tries each flood of issue 18 against a real allotd with a
// real agent, while another team's member keeps using the API: allotd's memory (VmRSS sampled
// every 50 ms, and VmHWM) and the latency of that member's requests, per flood.
//
//   build/bin/flood_bench                 # every flood, default limits
//   build/bin/flood_bench --log-mb 100    # the output flood's size
//
// Floods, in order, on one allotd that keeps its history between them (a cluster in use):
//   env     jobs with 240 KiB of environment each, from 8 connections, until allotd refuses
//           (the member's byte limit), all of them asking no CPU or GPU;
//   cancel  the member cancels them all;
//   log     one job writing --log-mb MB of output (allotd keeps --max-log-bytes of it);
//   bodies  8 unauthenticated uploads of 200 MiB each to /sessions/1/... at once;
//   hello   the host's own credential sends a hello of 150,000 GPUs (14 MB).
// The probe: GET /api/v1/jobs?limit=20 and GET /api/v1/hosts as the other member, one after the
// other, from one connection each time, all through every flood. Only 127.0.0.1 is contacted.

#include <CLI/CLI.hpp>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench_util.h"

namespace {

using Clock = std::chrono::steady_clock;
using allot::bench::httpRequest;
using json = nlohmann::json;
namespace beast = boost::beast;
using tcp = boost::asio::ip::tcp;

int fail(const std::string& msg) {
  std::cerr << "flood_bench: " << msg << "\n";
  return 1;
}

// Samples allotd's memory and probes the API until stopped; one line per flood.
class Watch {
 public:
  Watch(pid_t pid, uint16_t port, std::string token)
      : pid_(pid), port_(port), token_(std::move(token)) {}
  void start() {
    stop_ = false;
    latencies_.clear();
    maxRssKib_ = 0;
    failures_ = 0;
    sampler_ = std::thread([this] {
      while (!stop_) {
        maxRssKib_ = std::max(maxRssKib_.load(), allot::bench::procStatusKib(pid_, "VmRSS"));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
    prober_ = std::thread([this] {
      while (!stop_) {
        for (const char* target : {"/api/v1/jobs?limit=20", "/api/v1/hosts"}) {
          const auto t0 = Clock::now();
          auto r = httpRequest(port_, "GET", target, token_, "");
          const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          std::lock_guard lock(mu_);
          if (!r.ok() || r->status != 200) ++failures_;
          latencies_.push_back(ms);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }
  void report(const std::string& flood, const std::string& what) {
    stop_ = true;
    sampler_.join();
    prober_.join();
    std::lock_guard lock(mu_);
    std::vector<double> l = latencies_;
    const double p50 = allot::bench::percentile(l, 50), p99 = allot::bench::percentile(l, 99),
                 max = l.empty() ? 0 : *std::max_element(l.begin(), l.end());
    std::printf(
        "%-7s %-52s allotd RSS max %5.1f MiB (VmHWM %5.1f MiB); other member's API: %zu requests, "
        "p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d failed\n",
        flood.c_str(), what.c_str(), maxRssKib_ / 1024.0,
        allot::bench::procStatusKib(pid_, "VmHWM") / 1024.0, l.size(), p50, p99, max, failures_);
    std::fflush(stdout);
  }

 private:
  pid_t pid_;
  uint16_t port_;
  std::string token_;
  std::atomic<bool> stop_{true};
  std::atomic<int64_t> maxRssKib_{0};
  std::thread sampler_, prober_;
  std::mutex mu_;
  std::vector<double> latencies_;
  int failures_ = 0;
};

std::string bigJob(char fill) {
  json body = {{"command", {"sleep", "3600"}}, {"gpus", 0}};
  for (const char* k : {"A", "B", "C"}) body["env"][k] = std::string(80 << 10, fill);
  return body.dump();
}

// Sends one 200 MiB upload without a credential; the bytes allotd took before it answered.
int64_t uploadWithoutCredential(uint16_t port) {
  try {
    boost::asio::io_context io;
    beast::tcp_stream s(io);
    s.expires_after(std::chrono::seconds(30));
    s.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    const int64_t total = 200LL << 20;
    std::string head =
        "PUT /sessions/1/api/contents/big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/octet-stream\r\nContent-Length: " +
        std::to_string(total) + "\r\n\r\n";
    beast::error_code ec;
    boost::asio::write(s, boost::asio::buffer(head), ec);
    const std::string chunk(1 << 20, 'x');
    int64_t sent = 0;
    while (!ec && sent < total) {
      boost::asio::write(s, boost::asio::buffer(chunk), ec);
      if (!ec) sent += static_cast<int64_t>(chunk.size());
    }
    return sent;
  } catch (const std::exception&) {
    return -1;
  }
}

// A hello of `gpus` GPUs on the host's own stream; whether allotd kept the stream open after it.
bool forgedHello(uint16_t port, const std::string& credential, int gpus) {
  try {
    boost::asio::io_context io;
    beast::websocket::stream<tcp::socket> ws(io);
    ws.next_layer().connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    ws.set_option(
        beast::websocket::stream_base::decorator([&](beast::websocket::request_type& req) {
          req.set(beast::http::field::authorization, "Bearer " + credential);
        }));
    ws.handshake("127.0.0.1", "/api/v1/agent/stream");
    json inv = {{"hostname", "bench"},
                {"cpus", 4},
                {"memory_mib", 16384},
                {"gpus", json::array()},
                {"gpu_provider", "nvml"}};
    for (int i = 0; i < gpus; ++i)
      inv["gpus"].push_back({{"index", i},
                             {"uuid", "GPU-forged-" + std::to_string(i)},
                             {"minor", i % 4096},
                             {"model", "H100"},
                             {"memory_mib", 81559}});
    ws.text(true);
    beast::error_code ec;
    ws.write(boost::asio::buffer(
                 json{{"type", "hello"}, {"inventory", inv}, {"jobs", json::array()}}.dump()),
             ec);
    beast::flat_buffer buf;
    ws.next_layer().non_blocking(false);
    ws.read(buf, ec);  // allotd's answer: a desired state, or the close
    return !ec;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flood_bench: allotd's memory and API latency while one member floods it"};
  std::string bin = allot::bench::selfDir();
  int logMb = 100;
  app.add_option("--bin", bin, "directory with allotd and allot-agent");
  app.add_option("--log-mb", logMb, "MB of output the log flood's job writes")
      ->check(CLI::Range(1, 10'000));
  CLI11_PARSE(app, argc, argv);

  std::printf("machine: %s\n", allot::bench::machineLine().c_str());
  auto dir = allot::bench::makeScratchDir("allot-flood");
  if (!dir.ok()) return fail(dir.status().toString());
  auto server = allot::bench::startAllotd(bin + "/allotd", *dir + "/server");
  if (!server.ok()) return fail(server.status().toString());
  const uint16_t port = server->port;
  const std::string& admin = server->adminToken;
  auto agent = allot::bench::startSimAgent(bin + "/allot-agent", *server, "bench", "sim:8xH100",
                                           *dir + "/agent", {"--run-as-owner", "off"});
  if (!agent.ok()) return fail(agent.status().toString());
  for (const char* team : {"ml", "nlp"})
    (void)httpRequest(port, "POST", "/api/v1/teams", admin, json{{"name", team}}.dump());
  auto user = [&](const char* name, const char* team) {
    auto r = httpRequest(port, "POST", "/api/v1/users", admin,
                         json{{"name", name}, {"team", team}, {"role", "member"}}.dump());
    return r.ok() ? json::parse(r->body, nullptr, false).value("token", "") : "";
  };
  const std::string mallory = user("mallory", "ml"), bob = user("bob", "nlp");
  if (mallory.empty() || bob.empty()) return fail("cannot create users");
  // Wait for the host to take work.
  for (int i = 0; i < 600; ++i) {
    auto h = httpRequest(port, "GET", "/api/v1/hosts/bench", admin, "");
    if (h.ok() && json::parse(h->body, nullptr, false).value("admin_state", "") == "available")
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // The other member holds a job there all along.
  (void)httpRequest(port, "POST", "/api/v1/jobs", bob, R"({"command":["sleep","3600"],"gpus":1})");
  Watch watch(server->process.pid(), port, bob);

  // env: 240 KiB jobs from 8 connections until refused.
  watch.start();
  std::atomic<int> accepted{0}, refused{0};
  {
    std::vector<std::thread> senders;
    for (int t = 0; t < 8; ++t)
      senders.emplace_back([&, t] {
        while (refused.load() == 0) {
          auto r = httpRequest(port, "POST", "/api/v1/jobs", mallory, bigJob('a' + t));
          if (r.ok() && r->status == 201) {
            ++accepted;
          } else {
            ++refused;
          }
        }
      });
    for (auto& s : senders) s.join();
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the pushes to the agent settle
  watch.report("env", std::to_string(accepted.load()) + " jobs of 240 KiB accepted, then refused");

  // cancel: all of them.
  watch.start();
  {
    auto list = httpRequest(port, "GET", "/api/v1/jobs?limit=1000", mallory, "");
    json jobs = list.ok() ? json::parse(list->body, nullptr, false) : json::array();
    for (const auto& j : jobs)
      if (j.value("state", "") != "cancelled")
        (void)httpRequest(port, "POST",
                          "/api/v1/jobs/" + std::to_string(j.value("id", 0)) + "/cancel", mallory,
                          "{}");
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));
  watch.report("cancel", "the member cancels them all");

  // log: one job writing logMb MB.
  watch.start();
  {
    const std::string script = "head -c " + std::to_string(int64_t{logMb} * 1'000'000) +
                               " /dev/zero | tr '\\0' x; echo; echo done";
    auto r = httpRequest(port, "POST", "/api/v1/jobs", mallory,
                         json{{"command", {"sh", "-c", script}}}.dump());
    const int64_t id = r.ok() ? json::parse(r->body, nullptr, false).value("id", 0) : 0;
    for (int i = 0; i < 3000 && id > 0; ++i) {
      auto j = httpRequest(port, "GET", "/api/v1/jobs/" + std::to_string(id), mallory, "");
      if (j.ok() && json::parse(j->body, nullptr, false).value("state", "") == "succeeded") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  int64_t stored = 0;
  for (const auto& e : std::filesystem::directory_iterator(*dir + "/server/logs"))
    if (e.is_regular_file()) stored += static_cast<int64_t>(e.file_size());
  watch.report("log", "a job writes " + std::to_string(logMb) + " MB; allotd stores " +
                          std::to_string(stored >> 20) + " MiB");

  // bodies: 8 x 200 MiB without a credential.
  watch.start();
  {
    std::vector<std::thread> uploads;
    std::atomic<int64_t> taken{0};
    for (int t = 0; t < 8; ++t)
      uploads.emplace_back([&] { taken += std::max<int64_t>(0, uploadWithoutCredential(port)); });
    for (auto& u : uploads) u.join();
    watch.report("bodies", "8 x 200 MiB unauthenticated; " + std::to_string(taken.load() >> 20) +
                               " MiB sent before allotd closed");
  }

  // hello: the host credential claims 150,000 GPUs.
  watch.start();
  {
    std::ifstream in(*dir + "/agent/credential.json");
    json cred = json::parse(in, nullptr, false);
    const bool kept = forgedHello(port, cred.value("token", ""), 150'000);
    auto hosts = httpRequest(port, "GET", "/api/v1/hosts", admin, "");
    watch.report("hello", std::string("150,000 GPUs (14 MB): stream ") +
                              (kept ? "kept (!)" : "closed") + ", host list " +
                              std::to_string(hosts.ok() ? hosts->body.size() : 0) + " bytes");
  }
  return 0;
}
