// Request to process started: the time from just before POST /api/v1/jobs is sent to the
// moment the job's own process runs, on one loopback agent with simulated GPUs.
//
//   build/bin/start_latency                       # 200 jobs, one at a time
//   build/bin/start_latency --jobs 500 --gpus 8
//   ALLOT_BENCH_DIR=/some/disk build/bin/start_latency
//
// It starts allotd (fresh SQLite data dir) and one allot-agent (--gpus sim:8xH100), both from
// next to this binary unless --bin says otherwise. Each job runs `start_stamp FILE`, which writes
// CLOCK_REALTIME ns into FILE; the latency is that stamp minus CLOCK_REALTIME taken just before
// the request was written. Jobs run one at a time: the next is submitted only once the previous
// one is `succeeded`, so each measures an idle system. Included: a fresh TCP connection, the
// POST (durable commit), the scheduling pass and its durable commit, the push to the agent over
// its WebSocket, the agent's fork/exec of allot-job-shim and the shim's exec of the command.
// Every wait is bounded; only 127.0.0.1 is contacted.

#include <sys/stat.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench_util.h"

namespace {

using Clock = std::chrono::steady_clock;
using allot::bench::httpRequest;
using allot::bench::percentile;

int64_t realtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int fail(const std::string& msg) {
  std::cerr << "start_latency: " << msg << "\n";
  return 1;
}

// Polls `pred` every `every` until it is true or `timeout` passes.
template <typename Pred>
bool waitFor(Pred pred, std::chrono::milliseconds timeout, std::chrono::microseconds every) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "start_latency: POST /api/v1/jobs to the job's process running, on a loopback agent"};
  std::string bin = allot::bench::selfDir();
  int jobs = 200, warmup = 5, gpus = 1;
  bool keep = false, verbose = false;
  app.add_option("--bin", bin, "directory with allotd, allot-agent, allot-job-shim, start_stamp");
  app.add_option("--jobs", jobs, "measured jobs, one at a time")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", warmup, "jobs run first and not counted")->check(CLI::Range(0, 1000));
  app.add_option("--gpus", gpus, "GPUs per job (the simulated host has 8)")
      ->check(CLI::Range(0, 8));
  int standbys = -1;
  app.add_option("--standby-shims", standbys,
                 "the agent's standby shims (default: the agent's own); 0 starts every job on a "
                 "shim of its own")
      ->check(CLI::Range(0, 16));
  app.add_flag("--keep", keep, "keep the data dir");
  app.add_flag("--verbose", verbose,
               "print each job's wall-clock times (to line up with strace -tt)");
  CLI11_PARSE(app, argc, argv);

  std::printf("machine: %s\n", allot::bench::machineLine().c_str());
  auto dir = allot::bench::makeScratchDir("allot-start-latency");
  if (!dir.ok()) return fail(dir.status().toString());
  std::string stamps = *dir + "/stamps";
  // A root agent runs jobs as their owner (the admin's uid here, not root): they must write
  // their stamps (the scratch dir itself lets them through).
  ::mkdir(stamps.c_str(), 0755);
  ::chmod(stamps.c_str(), 01777);

  auto server = allot::bench::startAllotd(bin + "/allotd", *dir + "/server");
  if (!server.ok()) return fail(server.status().toString());
  const std::string& token = server->adminToken;
  auto team = httpRequest(server->port, "POST", "/api/v1/teams", token, R"({"name":"bench"})");
  if (!team.ok() || team->status != 201) return fail("cannot create team");
  std::vector<std::string> agentFlags;
  if (standbys >= 0) agentFlags = {"--standby-shims", std::to_string(standbys)};
  auto agent = allot::bench::startSimAgent(bin + "/allot-agent", *server, "bench-local",
                                           "sim:8xH100", *dir + "/agent", agentFlags);
  if (!agent.ok()) return fail(agent.status().toString());
  bool online = waitFor(
      [&] {
        auto h = httpRequest(server->port, "GET", "/api/v1/hosts/bench-local", token, "");
        return h.ok() && h->status == 200 &&
               nlohmann::json::parse(h->body, nullptr, false).value("state", "") == "online";
      },
      std::chrono::seconds(30), std::chrono::milliseconds(50));
  if (!online) return fail("the agent did not come online (see " + *dir + "/agent.log)");

  const std::string stampBin = bin + "/start_stamp";
  std::vector<double> startMs, replyMs;
  double load0 = allot::bench::loadAverage1();
  for (int i = 0; i < warmup + jobs; ++i) {
    std::string stampPath = stamps + "/" + std::to_string(i);
    nlohmann::json body = {{"command", {stampBin, stampPath}}, {"team", "bench"}, {"gpus", gpus}};
    std::string text = body.dump();
    int64_t sentNs = realtimeNs();
    auto reply = httpRequest(server->port, "POST", "/api/v1/jobs", token, text);
    int64_t replyNs = realtimeNs();
    if (!reply.ok() || reply->status != 201)
      return fail("submit failed: " + (reply.ok() ? reply->body : reply.status().toString()));
    int64_t id = nlohmann::json::parse(reply->body)["id"].get<int64_t>();

    struct stat st {};
    bool started = waitFor([&] { return ::stat(stampPath.c_str(), &st) == 0; },
                           std::chrono::seconds(10), std::chrono::microseconds(200));
    if (!started) return fail("job " + std::to_string(id) + " did not start within 10 s");
    int64_t stampNs = 0;
    std::ifstream(stampPath) >> stampNs;

    std::string state;
    bool finished = waitFor(
        [&] {
          auto j =
              httpRequest(server->port, "GET", "/api/v1/jobs/" + std::to_string(id), token, "");
          if (!j.ok() || j->status != 200) return false;
          state = nlohmann::json::parse(j->body, nullptr, false).value("state", "");
          return state == "succeeded" || state == "failed" || state == "cancelled" ||
                 state == "lost";
        },
        std::chrono::seconds(10), std::chrono::milliseconds(5));
    if (!finished || state != "succeeded")
      return fail("job " + std::to_string(id) + " ended as '" + state + "'");
    if (verbose) {
      time_t secs = static_cast<time_t>(sentNs / 1'000'000'000);
      tm local{};
      localtime_r(&secs, &local);
      std::printf("  job %lld sent %02d:%02d:%02d.%06lld reply +%.2f ms started +%.2f ms\n",
                  static_cast<long long>(id), local.tm_hour, local.tm_min, local.tm_sec,
                  static_cast<long long>(sentNs % 1'000'000'000 / 1000),
                  static_cast<double>(replyNs - sentNs) / 1e6,
                  static_cast<double>(stampNs - sentNs) / 1e6);
    }
    if (i >= warmup) {
      startMs.push_back(static_cast<double>(stampNs - sentNs) / 1e6);
      replyMs.push_back(static_cast<double>(replyNs - sentNs) / 1e6);
    }
  }
  auto report = [](const char* what, std::vector<double>& v) {
    double p50 = percentile(v, 50), p90 = percentile(v, 90), p99 = percentile(v, 99);
    std::printf("%s n=%zu min_ms=%.2f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", what,
                v.size(), v.front(), p50, p90, p99, v.back());
  };
  std::printf("start_latency jobs=%d gpus=%d load_before=%.2f\n", jobs, gpus, load0);
  report("  post_to_process_started", startMs);
  report("  post_to_201_reply      ", replyMs);
  agent->stop();
  server->process.stop();
  if (!keep) allot::bench::removeTree(*dir);
  return 0;
}
