// Placement decisions per second: one choose() per iteration on a cluster about half full, for
// each policy, on a synthetic cluster shaped like openb (1,213 nodes, 2/4/8 GPUs) and on 10,000
// hosts x 8 GPUs. Run: build/bin/placement_bench --benchmark_counters_tabular=true

#include <benchmark/benchmark.h>

#include <random>

#include "sched/placement/policy.h"

namespace {

using namespace allot::sched::placement;

// n tasks drawn from 150 shapes (openb's default list has 151 distinct task types), as FGD's
// workload model and its per-type cache assume a real workload's few recurring types.
std::vector<Task> workload(uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<Task> shapes;
  for (int i = 0; i < 150; ++i) {
    Task t{int64_t(1000 + rng() % 16000), int64_t(1024 + rng() % 32768), 1, 1000, kAnyModel};
    int kind = rng() % 10;
    if (kind < 4) t.gpuMilli = 100 + rng() % 900;  // shared, as in openb (~40% of tasks)
    if (kind == 8) t.numGpu = 2 + rng() % 7;
    if (kind == 9) t.numGpu = 0, t.gpuMilli = 0;
    shapes.push_back(t);
  }
  std::vector<Task> out;
  for (int i = 0; i < n; ++i) out.push_back(shapes[rng() % shapes.size()]);
  return out;
}

std::vector<NodeSpec> nodes(int count, bool openbShape) {
  std::vector<NodeSpec> out;
  for (int i = 0; i < count; ++i) {
    int gpus = openbShape ? (i % 3 == 0 ? 2 : (i % 3 == 1 ? 4 : 8)) : 8;
    out.push_back({"n" + std::to_string(i), 96000, 786432, gpus, i % 2 ? "G2" : "G1"});
  }
  return out;
}

void run(benchmark::State& st, const std::string& policyName, int count, bool openbShape) {
  auto tasks = workload(1, 20000);
  auto state = std::move(ClusterState::create(nodes(count, openbShape))).value();
  auto policy = std::move(makePolicy(policyName, 1, tasks)).value();
  // Fill to about half of the GPU capacity with the same policy.
  for (size_t i = 0; state.allocatedGpuMilli() * 2 < state.totalGpuMilli(); ++i) {
    const Task& t = tasks[i % tasks.size()];
    Choice c = policy->choose(state, t);
    if (c.ok()) state.apply(t, c);
  }
  size_t i = 0;
  for (auto _ : st) {
    Choice c = policy->choose(state, tasks[i++ % tasks.size()]);
    benchmark::DoNotOptimize(c);
  }
  st.counters["decisions_per_s"] =
      benchmark::Counter(double(st.iterations()), benchmark::Counter::kIsRate);
}

void registerAll() {
  for (const char* p : {"random", "firstfit", "bestfit", "fgd"}) {
    benchmark::RegisterBenchmark((std::string("BM_Choose/openb1213/") + p).c_str(),
                                 [p](benchmark::State& st) { run(st, p, 1213, true); });
    benchmark::RegisterBenchmark((std::string("BM_Choose/hosts10000x8/") + p).c_str(),
                                 [p](benchmark::State& st) { run(st, p, 10000, false); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
