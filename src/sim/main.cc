// allot-sim: replays a trace through the placement policies. `alloc` runs the FGD paper's
// allocation-ratio protocol for several policies side by side; `replay` runs the trace in time
// through the fleet scheduler (sched::decide) that allotd uses, policy by policy.

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "sim/alloc_sim.h"
#include "sim/replay.h"
#include "sim/trace.h"

namespace {

using namespace allot;

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t pos = s.find(',', start);
    if (pos == std::string::npos) pos = s.size();
    if (pos > start) out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
  return out;
}

// "42..51" or "1,2,3".
Result<std::vector<uint64_t>> parseSeeds(const std::string& s) {
  std::vector<uint64_t> out;
  try {
    auto dots = s.find("..");
    if (dots != std::string::npos) {
      uint64_t a = std::stoull(s.substr(0, dots)), b = std::stoull(s.substr(dots + 2));
      if (b < a || b - a > 100000) return Status::InvalidArgument("bad seed range '" + s + "'");
      for (uint64_t x = a; x <= b; ++x) out.push_back(x);
    } else {
      for (const auto& p : splitList(s)) out.push_back(std::stoull(p));
    }
  } catch (const std::exception&) {
    return Status::InvalidArgument("bad seeds '" + s + "' (want 42..51 or 1,2,3)");
  }
  if (out.empty()) return Status::InvalidArgument("no seeds in '" + s + "'");
  return out;
}

int runAllocCommand(const std::string& nodesPath, const std::string& podsPath,
                    const std::string& seedsText, const std::string& policies,
                    const std::string& format) {
  auto seeds = parseSeeds(seedsText);
  if (!seeds.ok()) {
    std::fprintf(stderr, "allot-sim: %s\n", seeds.status().message().c_str());
    return 2;
  }
  auto nodes = sim::loadNodes(nodesPath);
  if (!nodes.ok()) {
    std::fprintf(stderr, "allot-sim: loading nodes: %s\n", nodes.status().message().c_str());
    return 1;
  }
  auto trace = sim::loadTasks(podsPath);
  if (!trace.ok()) {
    std::fprintf(stderr, "allot-sim: loading pods: %s\n", trace.status().message().c_str());
    return 1;
  }
  auto cluster = sched::placement::ClusterState::create(*nodes);
  if (!cluster.ok()) {
    std::fprintf(stderr, "allot-sim: %s: %s\n", nodesPath.c_str(),
                 cluster.status().message().c_str());
    return 1;
  }
  auto tasks = sim::resolveTasks(*cluster, *trace);
  nlohmann::json results = nlohmann::json::array();
  if (format != "json") {
    std::printf("nodes %s (%d nodes, %lld GPUs), pods %s (%zu tasks), %zu seeds\n",
                nodesPath.c_str(), cluster->size(),
                static_cast<long long>(cluster->totalGpuMilli() / 1000), podsPath.c_str(),
                tasks.size(), seeds->size());
    std::printf("%-10s %10s %10s %12s %12s %10s\n", "policy", "alloc_100", "alloc_130",
                "placements", "decisions/s", "wall_s");
  }
  for (const auto& policy : splitList(policies)) {
    auto start = std::chrono::steady_clock::now();
    auto r = sim::runAlloc(*nodes, tasks, policy, *seeds);
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!r.ok()) {
      std::fprintf(stderr, "allot-sim: %s\n", r.status().message().c_str());
      return 2;
    }
    if (format == "json") {
      nlohmann::json perSeed = nlohmann::json::array();
      for (const auto& s : r->perSeed) {
        perSeed.push_back({{"seed", s.seed},
                           {"alloc_100", s.alloc100},
                           {"alloc_130", s.alloc130},
                           {"placements", s.placements},
                           {"decisions", s.decisions}});
      }
      results.push_back({{"policy", policy},
                         {"alloc_100", r->alloc100},
                         {"alloc_130", r->alloc130},
                         {"per_seed", perSeed},
                         {"placements", r->placements},
                         {"decisions", r->decisions},
                         {"wall_seconds", wall}});
    } else {
      std::printf("%-10s %9.2f%% %9.2f%% %12lld %12.0f %10.2f\n", policy.c_str(), r->alloc100,
                  r->alloc130, static_cast<long long>(r->placements), r->decisions / wall, wall);
    }
  }
  if (format == "json") std::printf("%s\n", results.dump(2).c_str());
  return 0;
}

nlohmann::json teamJson(const sim::TeamReplay& t) {
  return {{"team", t.team},
          {"tasks", t.tasks},
          {"placed", t.placed},
          {"completed", t.completed},
          {"requeued", t.requeued},
          {"killed", t.killed},
          {"never_placed", t.neverPlaced},
          {"delay_s",
           {{"count", t.delay.count},
            {"mean", t.delay.meanS},
            {"p50", t.delay.p50S},
            {"p99", t.delay.p99S},
            {"max", t.delay.maxS}}},
          {"gpu_seconds_received", t.gpuSecondsReceived},
          {"gpu_seconds_demanded", t.gpuSecondsDemanded},
          {"service_ratio", t.serviceRatio}};
}

nlohmann::json replayJson(const sim::ReplayResult& r, double wall) {
  nlohmann::json teams = nlohmann::json::array();
  for (const auto& t : r.teams) teams.push_back(teamJson(t));
  return {{"policy", r.policy},
          {"teams", teams},
          {"overall", teamJson(r.overall)},
          {"utilisation",
           {{"sample_seconds", r.sampleMs / 1000},
            {"mean_percent", r.meanUtilisation},
            {"series_percent", r.utilisation}}},
          {"jain", r.jain},
          {"preemptions", {{"requeued", r.overall.requeued}, {"killed", r.overall.killed}}},
          {"never_placed", r.overall.neverPlaced},
          {"impossible", r.impossible},
          {"placements", r.placements},
          {"max_pending", r.maxPending},
          {"end_seconds", r.endMs / 1000},
          {"wall_seconds", wall},
          {"passes", r.passes}};
}

void printReplay(const sim::ReplayResult& r, double wall) {
  std::printf("\npolicy %s: %lld passes in %.2f s wall (%.2f ms per pass), last event at %lld s\n",
              r.policy.c_str(), static_cast<long long>(r.passes), wall,
              r.passes > 0 ? 1000.0 * wall / double(r.passes) : 0.0,
              static_cast<long long>(r.endMs / 1000));
  std::printf("%-7s %6s %6s %9s %11s %10s %10s %10s %8s %6s %6s %12s %12s %7s\n", "team", "tasks",
              "placed", "completed", "delay_mean", "delay_p50", "delay_p99", "delay_max",
              "requeued", "killed", "never", "gpu_s_recv", "gpu_s_dem", "ratio");
  auto row = [](const sim::TeamReplay& t) {
    std::printf(
        "%-7s %6lld %6lld %9lld %10.0fs %9.0fs %9.0fs %9.0fs %8lld %6lld %6lld %12.4g %12.4g "
        "%7.4f\n",
        t.team.c_str(), static_cast<long long>(t.tasks), static_cast<long long>(t.placed),
        static_cast<long long>(t.completed), t.delay.meanS, t.delay.p50S, t.delay.p99S,
        t.delay.maxS, static_cast<long long>(t.requeued), static_cast<long long>(t.killed),
        static_cast<long long>(t.neverPlaced), t.gpuSecondsReceived, t.gpuSecondsDemanded,
        t.serviceRatio);
  };
  for (const auto& t : r.teams) row(t);
  row(r.overall);
  double peak = 0;
  for (double u : r.utilisation) peak = std::max(peak, u);
  std::printf(
      "GPU utilisation: time-weighted mean %.2f%%, peak sample %.2f%% (%zu samples every "
      "%lld s); Jain %.4f; impossible %lld; max queue %lld\n",
      r.meanUtilisation, peak, r.utilisation.size(), static_cast<long long>(r.sampleMs / 1000),
      r.jain, static_cast<long long>(r.impossible), static_cast<long long>(r.maxPending));
}

struct ReplayArgs {
  std::string nodes, pods, times, policies = "fgd", format = "table";
  int teams = 4;
  double guaranteeShare = 0.8;
  double nodeFraction = 1.0;
  int64_t graceS = 0, sampleS = 3600, halfLifeS = 3600;
  uint64_t seed = 42;
  bool declareRuntimes = false;
};

int runReplayCommand(const ReplayArgs& a) {
  std::vector<std::string> policies = splitList(a.policies);
  if (a.policies == "all") policies = {"fgd", "bestfit", "firstfit", "random"};
  if (policies.empty()) {
    std::fprintf(stderr, "allot-sim: --policy: no policy in '%s'\n", a.policies.c_str());
    return 2;
  }
  sim::ReplayOptions o;
  o.teams = a.teams;
  o.guaranteeShare = a.guaranteeShare;
  o.seed = a.seed;
  o.graceMs = a.graceS * 1000;
  o.sampleMs = a.sampleS * 1000;
  o.usageHalfLifeMs = a.halfLifeS * 1000;
  o.declareRuntimes = a.declareRuntimes;
  auto nodes = sim::loadNodes(a.nodes);
  if (!nodes.ok()) {
    std::fprintf(stderr, "allot-sim: loading nodes: %s\n", nodes.status().message().c_str());
    return 1;
  }
  auto pods = sim::loadTasks(a.pods);
  if (!pods.ok()) {
    std::fprintf(stderr, "allot-sim: loading pods: %s\n", pods.status().message().c_str());
    return 1;
  }
  Result<std::vector<sim::TraceTask>> times = std::vector<sim::TraceTask>{};
  if (!a.times.empty()) {
    times = sim::loadTasks(a.times);
    if (!times.ok()) {
      std::fprintf(stderr, "allot-sim: loading times: %s\n", times.status().message().c_str());
      return 1;
    }
  }
  auto trace = sim::buildReplayTrace(*pods, a.times.empty() ? nullptr : &*times, a.teams);
  if (!trace.ok()) {
    std::fprintf(stderr, "allot-sim: %s: %s\n", a.pods.c_str(), trace.status().message().c_str());
    return 2;
  }
  const auto hosts =
      sim::replayHosts(a.nodeFraction < 1.0 ? sim::nodeFraction(*nodes, a.nodeFraction) : *nodes);
  int64_t gpus = 0;
  for (const auto& h : hosts) gpus += static_cast<int64_t>(h.gpus.size());
  if (a.format != "json") {
    std::printf("nodes %s (%zu hosts, %lld GPUs, all shared; node fraction %g), pods %s (%zu tasks",
                a.nodes.c_str(), hosts.size(), static_cast<long long>(gpus), a.nodeFraction,
                a.pods.c_str(), trace->tasks.size());
    if (trace->timesBorrowed > 0)
      std::printf(", times of %d from %s, %d of them by name hash", trace->timesBorrowed,
                  a.times.c_str(), trace->timesHashed);
    std::printf(
        "), trace end %lld s\n%d teams by row index mod %d, guarantee %.0f%% of the GPUs "
        "split equally, unlimited borrowing and lending; BE preemptible; grace %lld s\n",
        static_cast<long long>(trace->endMs / 1000), a.teams, a.teams, 100 * a.guaranteeShare,
        static_cast<long long>(a.graceS));
  }
  nlohmann::json results = nlohmann::json::array();
  std::vector<std::pair<sim::ReplayResult, double>> done;
  for (const auto& policy : policies) {
    o.policy = policy;
    auto start = std::chrono::steady_clock::now();
    auto r = sim::runReplay(hosts, *trace, o);
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!r.ok()) {
      std::fprintf(stderr, "allot-sim: replay: %s\n", r.status().message().c_str());
      return 2;
    }
    if (a.format == "json") {
      nlohmann::json j = replayJson(*r, wall);
      j["hosts"] = hosts.size();
      j["gpus"] = gpus;
      j["node_fraction"] = a.nodeFraction;
      j["trace_end_seconds"] = trace->endMs / 1000;
      results.push_back(std::move(j));
    } else {
      printReplay(*r, wall);
    }
    done.emplace_back(std::move(*r), wall);
  }
  if (a.format == "json") {
    if (results.size() == 1) {
      std::printf("%s\n", results[0].dump(2).c_str());
    } else {
      std::printf("%s\n", nlohmann::json{{"policies", results}}.dump(2).c_str());
    }
    return 0;
  }
  if (done.size() > 1) {
    std::printf("\n%-9s %11s %10s %10s %10s %9s %9s %7s %6s %7s %8s %8s\n", "policy", "delay_mean",
                "delay_p50", "delay_p99", "delay_max", "util_mean", "requeued", "killed", "never",
                "jain", "passes", "wall_s");
    for (const auto& [r, wall] : done) {
      std::printf(
          "%-9s %10.0fs %9.0fs %9.0fs %9.0fs %8.2f%% %9lld %7lld %6lld %7.4f %8lld %8.2f\n",
          r.policy.c_str(), r.overall.delay.meanS, r.overall.delay.p50S, r.overall.delay.p99S,
          r.overall.delay.maxS, r.meanUtilisation, static_cast<long long>(r.overall.requeued),
          static_cast<long long>(r.overall.killed), static_cast<long long>(r.overall.neverPlaced),
          r.jain, static_cast<long long>(r.passes), wall);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"allot-sim: replay GPU cluster traces through Allot's placement policies"};
  app.require_subcommand(1);
  std::string nodes = "../shared/traces/openb/openb_node_list_gpu_node.csv";
  std::string pods = "../shared/traces/openb/openb_pod_list_default.csv";
  std::string seeds = "42..51";
  std::string policies = "random,firstfit,bestfit,fgd";
  std::string format = "table";
  auto* alloc = app.add_subcommand("alloc", "allocation ratio at 100% and 130% of arrivals");
  alloc->add_option("--nodes", nodes, "node list CSV")->capture_default_str();
  alloc->add_option("--pods", pods, "pod list CSV")->capture_default_str();
  alloc->add_option("--seeds", seeds, "seeds: 42..51 or 1,2,3")->capture_default_str();
  alloc->add_option("--policy", policies, "comma-separated: random,firstfit,bestfit,fgd")
      ->capture_default_str();
  alloc->add_option("-o,--output", format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();

  ReplayArgs ra;
  ra.nodes = nodes;
  ra.pods = pods;
  auto* replay = app.add_subcommand(
      "replay", "timed replay through the fleet scheduler: queueing delay, utilisation, fairness");
  replay->add_option("--nodes", ra.nodes, "node list CSV")->capture_default_str();
  replay->add_option("--pods", ra.pods, "pod list CSV")->capture_default_str();
  replay->add_option("--times", ra.times,
                     "pod list whose times and qos fill in --pods rows without creation_time, "
                     "by name");
  replay->add_option("--teams", ra.teams, "teams; task i goes to team i mod N")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  replay
      ->add_option("--policy", ra.policies, "comma-separated: fgd,bestfit,firstfit,random, or all")
      ->capture_default_str();
  replay
      ->add_option("--guarantee-share", ra.guaranteeShare,
                   "share of the GPUs guaranteed to the teams, split equally")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  replay
      ->add_option("--node-fraction", ra.nodeFraction,
                   "replay on this evenly spread fraction of each model's nodes")
      ->check(CLI::Range(1e-9, 1.0))
      ->capture_default_str();
  replay->add_option("--grace-s", ra.graceS, "seconds an evicted job takes to leave")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  replay->add_option("--sample-s", ra.sampleS, "utilisation sample period, seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  replay->add_option("--half-life-s", ra.halfLifeS, "half-life of the teams' usage history")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  replay->add_option("--seed", ra.seed, "seed of the random policy")->capture_default_str();
  replay->add_flag("--declare-runtimes", ra.declareRuntimes,
                   "give the scheduler each task's runtime as its declared maximum (backfill)");
  replay->add_option("-o,--output", ra.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, so a script's log says what was wrong.
    std::fprintf(stderr, "allot-sim: %s\n", e.what());
    return 2;
  }
  if (replay->parsed()) return runReplayCommand(ra);
  return runAllocCommand(nodes, pods, seeds, policies, format);
}
