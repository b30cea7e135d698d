// Handover of an idle host: the time from POST /api/v1/hosts/H/assign (or unassign) to the host
// being available to its new owner, through drain, wipe, a no-op hook and the health check.
//
//   build/bin/handover_bench                  # 10 rounds of assign + unassign
//   build/bin/handover_bench --rounds 50
//
// It starts allotd (fresh SQLite data dir, a config whose default handover profile is a no-op
// script) and one allot-agent (--gpus sim:8xH100), both from next to this binary unless --bin
// says otherwise. The host is idle, so the drain is immediate; the simulated GPUs skip the
// burn-in (there is no GPU to load), which a real host adds (allotd.toml [health]
// burn_in_duration, 3 s by default). Every wait is bounded; only 127.0.0.1 is contacted.

#include <sys/stat.h>

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

int fail(const std::string& msg) {
  std::cerr << "handover_bench: " << msg << "\n";
  return 1;
}

nlohmann::json hostNow(uint16_t port, const std::string& token) {
  auto h = httpRequest(port, "GET", "/api/v1/hosts/bench-local", token, "");
  if (!h.ok() || h->status != 200) return nlohmann::json::object();
  return nlohmann::json::parse(h->body, nullptr, false);
}

// Polls until the host is available in `pool`; the seconds it took, or -1 after 60 s.
double waitAvailable(uint16_t port, const std::string& token, const std::string& pool,
                     Clock::time_point since) {
  const auto deadline = since + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    nlohmann::json h = hostNow(port, token);
    if (h.value("admin_state", "") == "available" && h.value("pool", "") == pool &&
        h.value("task", nlohmann::json()).is_null())
      return std::chrono::duration<double>(Clock::now() - since).count();
    if (h.value("admin_state", "") == "failed") return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"handover_bench: assign and unassign an idle host, timed end to end"};
  std::string bin = allot::bench::selfDir();
  int rounds = 10;
  bool keep = false;
  app.add_option("--bin", bin, "directory with allotd and allot-agent");
  app.add_option("--rounds", rounds, "assign + unassign rounds")->check(CLI::Range(1, 1000));
  app.add_flag("--keep", keep, "keep the data dir");
  CLI11_PARSE(app, argc, argv);

  std::printf("machine: %s\n", allot::bench::machineLine().c_str());
  auto dir = allot::bench::makeScratchDir("allot-handover");
  if (!dir.ok()) return fail(dir.status().toString());
  const std::string hook = *dir + "/noop-profile.sh";
  std::ofstream(hook) << "#!/bin/sh\necho no-op profile for $ALLOT_TEAM\n";
  ::chmod(hook.c_str(), 0755);
  const std::string config = *dir + "/allotd.toml";
  std::ofstream(config) << "[hooks.profiles.noop]\nscript = \"" << hook
                        << "\"\n[handover]\ndefault_profile = \"noop\"\n";

  auto server = allot::bench::startAllotd(bin + "/allotd", *dir + "/server", {"--config", config});
  if (!server.ok()) return fail(server.status().toString());
  const std::string& token = server->adminToken;
  auto team = httpRequest(server->port, "POST", "/api/v1/teams", token, R"({"name":"bench"})");
  if (!team.ok() || team->status != 201) return fail("cannot create team");
  auto agent = allot::bench::startSimAgent(bin + "/allot-agent", *server, "bench-local",
                                           "sim:8xH100", *dir + "/agent");
  if (!agent.ok()) return fail(agent.status().toString());
  double commissioned = waitAvailable(server->port, token, "shared", Clock::now());
  if (commissioned < 0) return fail("the host was not commissioned (see " + *dir + ")");

  std::vector<double> assignS, unassignS;
  for (int i = 0; i < rounds; ++i) {
    for (const char* action : {"assign", "unassign"}) {
      const bool toTeam = std::string(action) == "assign";
      auto start = Clock::now();
      auto r = httpRequest(server->port, "POST", std::string("/api/v1/hosts/bench-local/") + action,
                           token, toTeam ? R"({"team":"bench"})" : "{}");
      if (!r.ok() || r->status != 200)
        return fail(std::string(action) + " failed: " + (r.ok() ? r->body : r.status().toString()));
      double s = waitAvailable(server->port, token, toTeam ? "bench" : "shared", start);
      if (s < 0) return fail(std::string(action) + " did not complete (see " + *dir + ")");
      (toTeam ? assignS : unassignS).push_back(s);
    }
  }
  auto report = [](const char* what, std::vector<double>& v) {
    std::printf("%s n=%zu min_s=%.3f p50_s=%.3f p90_s=%.3f max_s=%.3f\n", what, v.size(),
                allot::bench::percentile(v, 0), allot::bench::percentile(v, 50),
                allot::bench::percentile(v, 90), allot::bench::percentile(v, 100));
  };
  std::printf("handover_bench rounds=%d (idle host, 8 simulated GPUs, no-op script profile)\n",
              rounds);
  report("  assign_to_available  ", assignS);
  report("  unassign_to_available", unassignS);
  agent->stop();
  server->process.stop();
  if (!keep) allot::bench::removeTree(*dir);
  return 0;
}
