// The fleet that the console's map benchmark (bench/console/map_bench.mjs) looks at: allotd on
// loopback serving the built console, --hosts hosts of 8 simulated GPUs that join through the API
// and hold their agent streams open (no agent processes: bench/fake_fleet.h), jobs of six teams
// holding about 70% of the GPUs, and a telemetry round from every host each second, utilisation
// changing every round. It gives the admin a console password, prints
//   ready URL admin PASSWORD
// and keeps sending until stdin closes or --seconds pass. Only 127.0.0.1 is contacted.
//
// The fake hosts never start the jobs (they do not read their streams), so the jobs stay
// `scheduled`: they hold their GPUs all the same, which is what the map draws.
//
//   build/bin/console_fleet --hosts 1000 --web-dir web/dist

#include <poll.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "bench_util.h"
#include "fake_fleet.h"

namespace {

using nlohmann::json;

int fail(const std::string& msg) {
  std::cerr << "console_fleet: " << msg << "\n";
  return 1;
}

// True once stdin is closed (the benchmark that started us is done).
bool stdinClosed() {
  pollfd p{STDIN_FILENO, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  char buf[64];
  return ::read(STDIN_FILENO, buf, sizeof buf) <= 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A fleet of fake hosts with jobs and live telemetry, for the console's benchmark"};
  int hosts = 1000, seconds = 600;
  std::string bin = allot::bench::selfDir(), webDir;
  app.add_option("--hosts", hosts, "hosts of 8 simulated GPUs (default 1000)");
  app.add_option("--seconds", seconds, "stop after this long (default 600)");
  app.add_option("--bin", bin, "where allotd is (default: next to this binary)");
  app.add_option("--web-dir", webDir, "the built console (default: allotd's own default)");
  CLI11_PARSE(app, argc, argv);

  auto dir = allot::bench::makeScratchDir("allot-console-fleet");
  if (!dir.ok()) return fail(dir.status().toString());
  std::vector<std::string> extra = allot::bench::fakeFleetAllotdArgs(*dir);
  if (!webDir.empty()) extra.insert(extra.end(), {"--web-dir", webDir});
  auto d = allot::bench::startAllotd(bin + "/allotd", *dir + "/data", extra);
  if (!d.ok()) return fail(d.status().toString());
  const std::string admin = d->adminToken;
  auto call = [&](const std::string& method, const std::string& target, const json& body,
                  const std::string& token) {
    return allot::bench::callOrExit(d->port, method, target, body, token);
  };
  const std::string password = "console-bench-password";
  call("PUT", "/api/v1/users/admin/password", {{"password", password}}, admin);

  auto fleet = allot::bench::FakeFleet::join(d->port, admin, hosts, 8, "gpu");
  if (!fleet.ok()) return fail(fleet.status().toString());

  // Six teams, each with a member submitting whole-host, half-host and smaller jobs until about
  // 70% of the GPUs are asked for.
  std::vector<std::string> tokens;
  for (int t = 0; t < 6; ++t) {
    const std::string team = "team-" + std::string(1, static_cast<char>('a' + t));
    call("POST", "/api/v1/teams", {{"name", team}}, admin);
    tokens.push_back(
        call("POST", "/api/v1/users", {{"name", "user-" + team}, {"team", team}}, admin)
            .at("token"));
  }
  std::mt19937 rng(7);
  const int sizes[] = {8, 4, 2, 1};
  for (int asked = 0, j = 0; asked < hosts * 8 * 7 / 10; ++j) {
    const int gpus = sizes[rng() % 4];
    call("POST", "/api/v1/jobs", {{"command", {"sleep", "3600"}}, {"gpus", gpus}},
         tokens[j % tokens.size()]);
    asked += gpus;
  }

  std::printf("ready %s admin %s\n", d->url().c_str(), password.c_str());
  std::fflush(stdout);

  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int64_t at = 1'767'225'600'000;
  std::vector<int> util(8);
  while (std::chrono::steady_clock::now() < end && !stdinClosed()) {
    const auto round = std::chrono::steady_clock::now();
    at += 1000;
    for (int h = 0; h < hosts; ++h) {
      for (int g = 0; g < 8; ++g) util[g] = static_cast<int>(rng() % 101);
      if (!(*fleet)->send(h, (*fleet)->telemetry(h, at, util))) return fail("a stream broke");
    }
    std::this_thread::sleep_until(round + std::chrono::seconds(1));
  }
  fleet->reset();
  d->process.stop();
  allot::bench::removeTree(*dir);
  return 0;
}
