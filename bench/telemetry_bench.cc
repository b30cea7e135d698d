// The agent's cost of one telemetry round on an 8-GPU host: sample every GPU and encode the
// message it sends. At --telemetry-interval 1s the agent does one round a second, so a round of
// T microseconds costs T / 10,000 % of one core. See docs/benchmarks.md.
//
//   build/bin/telemetry_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
//   ALLOT_BENCH_NVML=libnvidia-ml.so.1 build/bin/telemetry_bench   # on a GPU host

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "agent/gpu/nvml_gpu_provider.h"
#include "agent/gpu/simulated_gpu_provider.h"
#include "model/agent_protocol.h"

namespace {

using allot::agent::GpuProvider;

void round(GpuProvider& p, benchmark::State& state) {
  for (auto _ : state) {
    auto samples = p.sample();
    if (!samples.ok()) {
      state.SkipWithError(samples.status().message().c_str());
      return;
    }
    allot::model::Telemetry t{"gpu-01", 1'700'000'000'000, 1000, std::move(*samples)};
    std::string msg = allot::model::toJson(t).dump();
    benchmark::DoNotOptimize(msg);
  }
}

// 8 simulated GPUs, each held by a job with a util file it has written: the most a simulated
// round does (one small file read per job).
void BM_SimulatedEightGpusRound(benchmark::State& state) {
  auto p = allot::agent::SimulatedGpuProvider::create("sim:8xH100", "bench");
  if (!p.ok()) {
    state.SkipWithError(p.status().message().c_str());
    return;
  }
  auto dir = std::filesystem::temp_directory_path() /
             ("allot-telemetry-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<GpuProvider::Workload> workloads;
  for (int g = 0; g < 8; ++g) {
    std::string file = (dir / ("util-" + std::to_string(g))).string();
    std::ofstream(file) << 40 + g << "\n";
    workloads.push_back({{g}, 70, file});
  }
  (*p)->setWorkloads(workloads);
  round(**p, state);
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_SimulatedEightGpusRound)->Unit(benchmark::kMicrosecond);

// 8 GPUs through the real dlopen/dlsym path against the fake libnvidia-ml, every reading
// present: the agent's own overhead per round. A real driver adds its ioctls on top.
void BM_NvmlFakeEightGpusRound(benchmark::State& state) {
  setenv("FAKE_NVML_GPUS", "8", 1);
  // ALLOT_BENCH_NVML=libnvidia-ml.so.1 measures the real driver on a GPU host (all its GPUs).
  const char* lib = std::getenv("ALLOT_BENCH_NVML");
  auto p = allot::agent::NvmlGpuProvider::open(lib ? lib : ALLOT_FAKE_NVML_PATH);
  if (!p.ok()) {
    state.SkipWithError(p.status().message().c_str());
    return;
  }
  round(**p, state);
}
BENCHMARK(BM_NvmlFakeEightGpusRound)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
