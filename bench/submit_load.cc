// Durable job submissions through the API: C keep-alive connections send N POST /api/v1/jobs in
// total (each connection one request at a time), counting 201s; reports throughput and latency.
//
//   build/bin/submit_load                                  # C = 1,16,64,256; N = 20000 each
//   build/bin/submit_load --connections 64 --requests 50000 --max-seconds 30
//   ALLOT_BENCH_DIR=/some/disk build/bin/submit_load       # where the data dir goes (real disk)
//
// By default every connection level gets a fresh allotd (started from --allotd, default: next to
// this binary) on an empty data dir with SQLite, so earlier levels leave no queue behind. With
// --port and --token it drives an allotd that is already running on 127.0.0.1 instead.
//
// Jobs ask for --gpus (default 1024, more than any host has), and no agent is started, so no job
// is ever placed: the measurement is the submission path (parse, authenticate, validate, group
// commit with fsync, reply), plus the scheduler passes that each new queued job triggers.
// A 201 means the job is on disk (docs/api.md). Every run is bounded by --requests and
// --max-seconds; only 127.0.0.1 is ever contacted.

// clang-format off
#include <utility>
// clang-format on
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench_util.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using allot::bench::percentile;

constexpr auto kRequestTimeout = std::chrono::seconds(10);

struct Options {
  std::string allotd;
  int port = 0;
  std::string token;
  std::string team = "bench";
  std::vector<int> connections = {1, 16, 64, 256};
  int64_t requests = 20000;
  double maxSeconds = 30;
  int gpus = 1024;
  std::string body;  // "": requestText's training job
  bool keep = false;
};

// State shared by the workers of one run; they all run on one thread.
struct Run {
  int64_t target = 0;
  Clock::time_point deadline;
  int64_t issued = 0;
  int64_t created = 0;
  int64_t failed = 0;
  std::string firstFailure;
  std::vector<double> latencyMs;
  std::vector<Clock::time_point> doneAt;  // completion time of each 201, in order
  int running = 0;
  Clock::time_point lastDone;
  asio::steady_timer* watchdog = nullptr;  // cancelled when the last worker ends
};

std::string requestText(const Options& o, const std::string& token) {
  // Realistic but fixed: a training command with a few arguments and two env vars.
  nlohmann::json body = {
      {"command", {"python3", "train.py", "--epochs=90", "--batch-size=256", "--lr=0.1"}},
      {"team", o.team},
      {"gpus", o.gpus},
      {"env", {{"SEED", "7"}, {"WANDB_MODE", "offline"}}}};
  std::string b = o.body.empty() ? body.dump() : o.body;
  std::ostringstream r;
  r << "POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " << token
    << "\r\nContent-Type: application/json\r\nContent-Length: " << b.size() << "\r\n\r\n"
    << b;
  return r.str();
}

// A plain socket, without a timer a request: arming and cancelling one per request cost the load
// generator's CPU on the cores allotd is measured on. One watchdog for the whole run closes every
// socket once no connection has had an answer for kRequestTimeout (10 to 20 s after the last).
asio::awaitable<void> worker(tcp::socket& stream, Run& run, const std::string& request) {
  // Room for a whole reply (about 1.1 KiB): Beast reads at most what the buffer has room for, at
  // least 512 bytes, so a buffer grown only as needed took two reads a reply.
  beast::flat_buffer buffer;
  buffer.reserve(16 * 1024);
  while (run.issued < run.target && Clock::now() < run.deadline) {
    ++run.issued;
    auto t0 = Clock::now();
    auto [wec, wn] =
        co_await asio::async_write(stream, asio::buffer(request), asio::as_tuple(use_awaitable));
    http::response_parser<http::string_body> parser;
    beast::error_code rec;
    if (!wec) {
      std::tie(rec, std::ignore) =
          co_await http::async_read(stream, buffer, parser, asio::as_tuple(use_awaitable));
    }
    auto t1 = Clock::now();
    if (wec || rec) {
      ++run.failed;
      if (run.firstFailure.empty()) run.firstFailure = (wec ? wec : rec).message();
      break;  // the connection is gone; the others carry on
    }
    if (parser.get().result_int() == 201) {
      ++run.created;
      run.latencyMs.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      run.doneAt.push_back(t1);
    } else {
      ++run.failed;
      if (run.firstFailure.empty())
        run.firstFailure = std::to_string(parser.get().result_int()) + " " + parser.get().body();
    }
    if (!parser.get().keep_alive()) break;
  }
  if (--run.running == 0) {
    run.lastDone = Clock::now();
    run.watchdog->cancel();
  }
}

// Closes every socket once a whole kRequestTimeout has passed without an answer on any connection
// (allotd hung), and stops when every worker has.
asio::awaitable<void> watchdog(std::vector<std::unique_ptr<tcp::socket>>& sockets, Run& run) {
  int64_t answered = 0;
  while (run.running > 0) {
    run.watchdog->expires_after(kRequestTimeout);
    co_await run.watchdog->async_wait(asio::as_tuple(use_awaitable));
    const int64_t now = run.created + run.failed;
    if (run.running > 0 && now == answered) {
      if (run.firstFailure.empty()) run.firstFailure = "no answer for 10 s";
      for (auto& s : sockets) {
        beast::error_code ignored;
        s->close(ignored);
      }
    }
    answered = now;
  }
}

double cpuSelfSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// One level of concurrency against allotd on 127.0.0.1:port. Returns false on a setup failure.
bool runLevel(const Options& o, uint16_t port, const std::string& token, pid_t serverPid,
              int connections) {
  asio::io_context io(1);
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
  std::vector<std::unique_ptr<tcp::socket>> streams;
  for (int i = 0; i < connections; ++i) {
    auto s = std::make_unique<tcp::socket>(io);
    beast::error_code ec;
    s->connect(ep, ec);
    if (ec) {
      std::cerr << "submit_load: connect 127.0.0.1:" << port << ": " << ec.message() << "\n";
      return false;
    }
    s->set_option(tcp::no_delay(true));
    streams.push_back(std::move(s));
  }
  const std::string request = requestText(o, token);
  Run run;
  run.target = o.requests;
  run.latencyMs.reserve(static_cast<size_t>(o.requests));
  run.doneAt.reserve(static_cast<size_t>(o.requests));
  run.running = connections;
  asio::steady_timer watchdogTimer(io);
  run.watchdog = &watchdogTimer;
  double serverCpu0 = serverPid > 0 ? allot::bench::procCpuSeconds(serverPid) : 0;
  double selfCpu0 = cpuSelfSeconds();
  double load0 = allot::bench::loadAverage1();
  auto t0 = Clock::now();
  run.deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.maxSeconds));
  for (auto& s : streams) asio::co_spawn(io, worker(*s, run, request), asio::detached);
  asio::co_spawn(io, watchdog(streams, run), asio::detached);
  io.run();
  double seconds = std::chrono::duration<double>(run.lastDone - t0).count();
  double serverCpu = serverPid > 0 ? allot::bench::procCpuSeconds(serverPid) - serverCpu0 : 0;
  double selfCpu = cpuSelfSeconds() - selfCpu0;
  double p50 = percentile(run.latencyMs, 50), p99 = percentile(run.latencyMs, 99);
  double max = run.latencyMs.empty() ? 0 : run.latencyMs.back();
  std::printf(
      "submit_load connections=%d requests=%lld created=%lld failed=%lld seconds=%.3f "
      "throughput=%.0f/s p50_ms=%.2f p99_ms=%.2f max_ms=%.2f allotd_cpu_us_per_job=%.1f "
      "loadgen_cpu_us_per_job=%.1f load_before=%.2f\n",
      connections, static_cast<long long>(run.issued), static_cast<long long>(run.created),
      static_cast<long long>(run.failed), seconds,
      seconds > 0 ? static_cast<double>(run.created) / seconds : 0, p50, p99, max,
      run.created > 0 && serverPid > 0 ? serverCpu * 1e6 / static_cast<double>(run.created) : 0,
      run.created > 0 ? selfCpu * 1e6 / static_cast<double>(run.created) : 0, load0);
  // Throughput per fifth of the jobs: every queued job stays queued, so later fifths run with a
  // longer queue behind each submission.
  if (run.doneAt.size() >= 10) {
    std::printf("  throughput by fifth:");
    Clock::time_point from = t0;
    for (int k = 1; k <= 5; ++k) {
      size_t lo = run.doneAt.size() * static_cast<size_t>(k - 1) / 5;
      size_t hi = run.doneAt.size() * static_cast<size_t>(k) / 5;
      Clock::time_point to = run.doneAt[hi - 1];
      double s = std::chrono::duration<double>(to - from).count();
      std::printf(" %.0f/s", s > 0 ? static_cast<double>(hi - lo) / s : 0);
      from = to;
    }
    std::printf("\n");
  }
  if (!run.firstFailure.empty())
    std::printf("  first failure: %s\n", run.firstFailure.substr(0, 300).c_str());
  if (serverPid > 0) {
    std::printf("  allotd VmHWM=%lld KiB\n",
                static_cast<long long>(allot::bench::procStatusKib(serverPid, "VmHWM")));
  }
  std::fflush(stdout);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"submit_load: durable job submissions per second through the allotd API"};
  Options o;
  o.allotd = allot::bench::selfDir() + "/allotd";
  app.add_option("--allotd", o.allotd, "allotd binary to start (default: next to this one)");
  app.add_option("--port", o.port, "use an allotd already listening on 127.0.0.1:PORT");
  app.add_option("--token", o.token, "with --port: a token that may submit to --team");
  app.add_option("--team", o.team, "team the jobs go to (created when allotd is ours)");
  app.add_option("--connections", o.connections, "concurrent keep-alive connections, one run each")
      ->delimiter(',');
  app.add_option("--requests", o.requests, "requests per run (upper bound)")
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  app.add_option("--max-seconds", o.maxSeconds, "time bound per run")
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--gpus", o.gpus, "GPUs each job asks for (1024: never placeable)");
  app.add_option("--body", o.body,
                 "JSON body of every request, instead of a training job asking for --gpus on "
                 "--team (bench/job_throughput.py sends its jobs with it)");
  app.add_flag("--keep", o.keep, "keep the data dirs");
  CLI11_PARSE(app, argc, argv);
  if (!o.body.empty() && !nlohmann::json::accept(o.body)) {
    std::cerr << "submit_load: --body is not JSON\n";
    return 2;
  }
  if (o.port != 0 && o.token.empty()) {
    std::cerr << "submit_load: --port needs --token\n";
    return 2;
  }

  std::printf("machine: %s\n", allot::bench::machineLine().c_str());
  for (int c : o.connections) {
    if (c < 1 || c > 4096) {
      std::cerr << "submit_load: --connections must be 1..4096\n";
      return 2;
    }
    if (o.port != 0) {
      if (!runLevel(o, static_cast<uint16_t>(o.port), o.token, -1, c)) return 1;
      continue;
    }
    auto dir = allot::bench::makeScratchDir("allot-submit-load");
    if (!dir.ok()) {
      std::cerr << "submit_load: " << dir.status().toString() << "\n";
      return 1;
    }
    // Submission throughput, not a tenant's share: the per-user and per-team job limits
    // (docs/access.md, "Limits") would refuse a run of 20,000 queued jobs by one user.
    const std::string config = *dir + "/allotd-unlimited.toml";
    std::ofstream(config)
        << "[limits]\nmax_active_jobs_per_user = 0\nmax_active_jobs_per_team = 0\n"
           "max_active_job_mib_per_user = 0\nmax_active_job_mib_per_team = 0\n";
    auto server = allot::bench::startAllotd(o.allotd, *dir, {"--config", config});
    if (!server.ok()) {
      std::cerr << "submit_load: " << server.status().toString() << "\n";
      return 1;
    }
    auto team = allot::bench::httpRequest(server->port, "POST", "/api/v1/teams", server->adminToken,
                                          nlohmann::json{{"name", o.team}}.dump());
    if (!team.ok() || team->status != 201) {
      std::cerr << "submit_load: cannot create team: "
                << (team.ok() ? team->body : team.status().toString()) << "\n";
      return 1;
    }
    bool ok = runLevel(o, server->port, server->adminToken, server->process.pid(), c);
    server->process.stop();
    if (!o.keep) allot::bench::removeTree(*dir);
    if (!ok) return 1;
  }
  return 0;
}
