// Telemetry ingest end to end: agents' WebSocket streams into a real allotd on loopback. It starts
// allotd (fresh data dir), joins --hosts hosts of 8 simulated GPUs through the API, places a
// one-GPU job on every GPU (so that every sample is attributed to an allocation), then opens one
// agent stream per host and sends telemetry rounds (8 GPUs, every reading) from --threads sender
// threads, for --seconds: each host a round every --round-ms, as an agent does at its fastest
// (allotd refuses a host's rounds beyond two a second, after a burst of four), and as fast as
// allotd takes them when it cannot keep up. The rate is allotd's own count of samples taken in
// (allot_telemetry_samples_total in /metrics) over the sending window; allotd's CPU time comes
// from /proc. The senders share the machine with allotd. Only 127.0.0.1 is contacted.
//
//   build/bin/telemetry_load --hosts 10000 --seconds 10

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench_util.h"
#include "fake_fleet.h"

namespace {

using Clock = std::chrono::steady_clock;
using allot::bench::httpRequest;
using nlohmann::json;

int fail(const std::string& msg) {
  std::cerr << "telemetry_load: " << msg << "\n";
  return 1;
}

double samplesTaken(uint16_t port, const std::string& token) {
  return allot::bench::metricValue(port, token, "allot_telemetry_samples_total");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Telemetry ingest through agent WebSocket streams into allotd on loopback"};
  int hosts = 10000, threads = 1, seconds = 10, gpus = 8, roundMs = 1000;
  std::string bin = allot::bench::selfDir();
  app.add_option("--hosts", hosts, "agent streams (default 10000)");
  app.add_option("--round-ms", roundMs, "each host sends a round this often (default 1000)")
      ->check(CLI::Range(600, 3'600'000));
  app.add_option("--gpus-per-host", gpus, "GPUs per host (default 8)");
  app.add_option("--threads", threads, "sender threads (default 1)");
  app.add_option("--seconds", seconds, "sending window (default 10)");
  app.add_option("--bin", bin, "where allotd is (default: next to this binary)");
  CLI11_PARSE(app, argc, argv);

  auto dir = allot::bench::makeScratchDir("allot-telemetry-load");
  if (!dir.ok()) return fail(dir.status().toString());
  // One user holds a job on every GPU of the fleet.
  auto d = allot::bench::startAllotd(
      bin + "/allotd", *dir + "/data",
      allot::bench::fakeFleetAllotdArgs(*dir, allot::bench::kNoActiveJobLimits));
  if (!d.ok()) return fail(d.status().toString());
  const std::string admin = d->adminToken;
  auto call = [&](const std::string& method, const std::string& target, const json& body,
                  const std::string& token) {
    return allot::bench::callOrExit(d->port, method, target, body, token);
  };
  call("POST", "/api/v1/teams", {{"name", "ml"}}, admin);
  const std::string alice =
      call("POST", "/api/v1/users", {{"name", "alice"}, {"team", "ml"}}, admin).at("token");
  auto fleet = allot::bench::FakeFleet::join(d->port, admin, hosts, gpus, "load");
  if (!fleet.ok()) return fail(fleet.status().toString());
  // One job per GPU, so every sample has an allocation to go to: arrays of up to 1,000 tasks.
  for (int left = hosts * gpus; left > 0; left -= 1000) {
    const int tasks = std::min(left, 1000);
    call("POST", "/api/v1/jobs",
         {{"command", {"sleep", "3600"}}, {"gpus", 1}, {"array", "0-" + std::to_string(tasks - 1)}},
         alice);
  }

  std::vector<int> util;
  for (int g = 0; g < gpus; ++g) util.push_back(40 + g);
  const double before = samplesTaken(d->port, admin);
  const double cpuBefore = allot::bench::procCpuSeconds(d->process.pid());
  std::atomic<bool> stop{false};
  std::atomic<int64_t> sent{0};
  std::vector<std::thread> senders;
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    senders.emplace_back([&, t] {
      int64_t at = 1'767'225'600'000;
      // A host's next round goes no sooner than --round-ms after its last one.
      std::vector<Clock::time_point> next(hosts, start);
      while (!stop) {
        at += roundMs;
        for (int h = t; h < hosts && !stop; h += threads) {
          std::this_thread::sleep_until(next[h]);
          next[h] = Clock::now() + std::chrono::milliseconds(roundMs);
          if (!(*fleet)->send(h, (*fleet)->telemetry(h, at, util, roundMs))) return;
          sent += gpus;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double after = samplesTaken(d->port, admin);
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpuAfter = allot::bench::procCpuSeconds(d->process.pid());
  stop = true;
  for (auto& s : senders) s.join();
  fleet->reset();
  std::printf(
      "hosts %d x %d GPUs, a round every %d ms each (%.0f samples/s offered), %d sender "
      "threads, %.1f s\n",
      hosts, gpus, roundMs, 1000.0 * hosts * gpus / roundMs, threads, elapsed);
  std::printf("samples taken in by allotd: %.0f (%.0f samples/s); sent %lld\n", after - before,
              (after - before) / elapsed, static_cast<long long>(sent.load()));
  std::printf("samples rejected: %.0f\n",
              allot::bench::metricValue(d->port, admin, "allot_telemetry_rejected_samples_total"));
  std::printf("allotd CPU: %.2f s over the window (%.0f%% of one core)\n", cpuAfter - cpuBefore,
              100 * (cpuAfter - cpuBefore) / elapsed);
  d->process.stop();
  allot::bench::removeTree(*dir);
  return after > before ? 0 : 1;
}
