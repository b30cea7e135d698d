// allot-sim: replays a trace through the placement policies. `alloc` runs the FGD paper's
// allocation-ratio protocol for several policies side by side.

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "sim/alloc_sim.h"
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
  CLI11_PARSE(app, argc, argv);
  return runAllocCommand(nodes, pods, seeds, policies, format);
}
