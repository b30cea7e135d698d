// The fleet scheduler's pass (sched::decide: quota, placement, reservations, waits) on large
// snapshots: decisions per second, the cost of a deep queue, and memory per GPU.
// Run: build/bin/fleet_bench --benchmark_counters_tabular=true
//
// - FillPass/<hosts>/<gpus per host>: an empty fleet and a queue of 1-8 GPU and fractional
//   requests of 4 teams with guarantees; one pass places as many as fit. decisions_per_s counts
//   every request decided (placed or told why it waits).
// - DeepQueue/<hosts>/<queued>/<varied>: a full fleet and a deep queue of requests that cannot
//   start: the pass must answer each with its reason without trying every request on every host,
//   also when every request asks a different CPU and memory (varied = 1).
// - ShortJobStream/<queued>: one full 8-GPU host and a queue of one-GPU requests of one team,
//   as in a stream of short jobs, where every job's end starts a pass over the whole queue.
// - Memory: bytes allocated by one pass at its peak, per GPU, at 80,000 GPUs.

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <random>

#include "sched/fleet.h"

// Live and peak heap bytes, for the memory figure. Counting is off unless a benchmark turns it
// on, so the others measure time without the bookkeeping in the way.
namespace {
std::atomic<bool> counting{false};
std::atomic<int64_t> live{0}, peak{0};
}  // namespace

void* operator new(size_t n) {
  void* p = std::malloc(n + 16);
  if (!p) throw std::bad_alloc();
  *static_cast<size_t*>(p) = n;
  if (counting.load(std::memory_order_relaxed)) {
    int64_t now = live.fetch_add(int64_t(n)) + int64_t(n);
    int64_t old = peak.load();
    while (now > old && !peak.compare_exchange_weak(old, now)) {
    }
  }
  return static_cast<char*>(p) + 16;
}
void operator delete(void* p) noexcept {
  if (!p) return;
  char* base = static_cast<char*>(p) - 16;
  if (counting.load(std::memory_order_relaxed))
    live.fetch_sub(int64_t(*reinterpret_cast<size_t*>(base)));
  std::free(base);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }

namespace {

using namespace allot::sched;

// `models`: how many GPU models the hosts have between them (host h has model h % models).
Snapshot fleet(int hosts, int gpusPerHost, int models = 2) {
  Snapshot s;
  s.now = 1'000'000;
  for (int h = 0; h < hosts; ++h) {
    HostView v;
    v.name = "gpu-" + std::to_string(h);
    v.cpuMillis = 128'000;
    v.memoryMib = 1'048'576;
    v.driverVersion = "550.54";
    v.cudaVersion = "12.4";
    for (int g = 0; g < gpusPerHost; ++g) {
      GpuView gv;
      gv.index = g;
      gv.model = models == 2 ? (h % 2 ? "H100" : "A100") : "M" + std::to_string(h % models);
      gv.memoryMib = 81'920;
      gv.shared = h % 8 == 0;  // one host in eight shares its GPUs
      gv.nvlinkDomain = g / 4;
      v.gpus.push_back(gv);
    }
    s.hosts.push_back(std::move(v));
  }
  const int totalGpus = hosts * gpusPerHost;
  for (const char* name : {"cv", "ml", "nlp", "speech"}) {
    TeamView t;
    t.name = name;
    t.guaranteed[""] = totalGpus / 5;
    s.teams.push_back(t);
  }
  return s;
}

// `varied`: every request asks a different amount of CPU and memory, as a real queue does.
void queue(Snapshot& s, int count, uint64_t seed, bool varied = false) {
  std::mt19937_64 rng(seed);
  static const char* teams[] = {"cv", "ml", "nlp", "speech"};
  for (int i = 0; i < count; ++i) {
    Request r;
    r.id = 1'000'000 + i;
    r.team = teams[rng() % 4];
    r.submittedAt = i;
    r.cpuMillis = varied ? 500 + static_cast<int64_t>(rng() % 16'000) : 4000;
    r.memoryMib = varied ? 1024 + static_cast<int64_t>(rng() % 131'072) : 32'768;
    int kind = static_cast<int>(rng() % 10);
    r.gpus = kind < 5 ? 1 : (kind < 7 ? 2 : (kind < 8 ? 4 : 8));
    if (kind == 9) {
      r.gpus = 1;
      r.gpuMilli = 250 * (1 + static_cast<int>(rng() % 3));
    }
    r.priority = static_cast<int>(rng() % 3);
    s.pending.push_back(r);
  }
}

void FillPass(benchmark::State& st) {
  Snapshot s = fleet(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)));
  queue(s, static_cast<int>(st.range(0) * st.range(1) / 2), 1);
  size_t placed = 0;
  for (auto _ : st) {
    auto d = decide(s);
    placed = d->placements.size();
    benchmark::DoNotOptimize(d);
  }
  st.counters["placed"] = double(placed);
  st.counters["decisions_per_s"] =
      benchmark::Counter(double(st.iterations() * s.pending.size()), benchmark::Counter::kIsRate);
}
BENCHMARK(FillPass)->Args({1213, 8})->Args({10000, 8})->Unit(benchmark::kMillisecond);

// FillPass on a fleet of many kinds (models x shared mode): 256 models make 512 kinds, past the
// 64 the pass once refused; requests ask any model, so every kind is a candidate.
void WideFill(benchmark::State& st) {
  Snapshot s = fleet(static_cast<int>(st.range(0)), 8, static_cast<int>(st.range(1)));
  queue(s, static_cast<int>(st.range(0) * 8 / 2), 1);
  size_t placed = 0;
  for (auto _ : st) {
    auto d = decide(s);
    placed = d.ok() ? d->placements.size() : 0;
    benchmark::DoNotOptimize(d);
  }
  st.counters["placed"] = double(placed);
  st.counters["decisions_per_s"] =
      benchmark::Counter(double(st.iterations() * s.pending.size()), benchmark::Counter::kIsRate);
}
BENCHMARK(WideFill)->Args({1213, 256})->Unit(benchmark::kMillisecond);

// One pass per iteration over a snapshot whose queue cannot all start: requests decided per second.
void passesOverTheQueue(benchmark::State& st, const Snapshot& s) {
  for (auto _ : st) {
    auto d = decide(s);
    benchmark::DoNotOptimize(d);
  }
  st.counters["queued"] = double(s.pending.size());
  st.counters["requests_per_s"] =
      benchmark::Counter(double(st.iterations() * s.pending.size()), benchmark::Counter::kIsRate);
}

// A full fleet: every GPU held by a running job; `queued` requests wait.
void DeepQueue(benchmark::State& st) {
  Snapshot s = fleet(static_cast<int>(st.range(0)), 8);
  int64_t id = 1;
  for (const auto& h : s.hosts) {
    for (const auto& g : h.gpus) {
      RunningJob j;
      j.id = id++;
      j.team = s.teams[id % 4].name;
      j.startedAt = 1;
      j.endsBy = j.id % 3 ? 2'000'000 + j.id : 0;
      j.slices.push_back({h.name, {g.index}, kMilliPerGpu, 1000, 1024});
      s.running.push_back(std::move(j));
    }
  }
  queue(s, static_cast<int>(st.range(1)), 2, st.range(2) != 0);
  passesOverTheQueue(st, s);
}
// Third argument 1: every queued request asks a different CPU and memory.
BENCHMARK(DeepQueue)
    ->Args({1213, 100'000, 0})
    ->Args({10000, 100'000, 0})
    ->Args({10000, 100'000, 1})
    ->Unit(benchmark::kMillisecond);

// One host of 8 GPUs, each held by a one-GPU job, and `queued` one-GPU requests of one team
// behind them: what each pass costs in a stream of short jobs (bench/job_throughput.py), where
// every job's end starts a pass over the whole queue.
void ShortJobStream(benchmark::State& st) {
  Snapshot s = fleet(1, 8);
  s.teams.resize(1);
  s.teams[0].guaranteed.clear();
  for (const auto& g : s.hosts[0].gpus) {
    RunningJob j;
    j.id = g.index + 1;
    j.team = s.teams[0].name;
    j.startedAt = 1;
    j.slices.push_back({s.hosts[0].name, {g.index}, kMilliPerGpu, 0, 0});
    s.running.push_back(std::move(j));
  }
  for (int i = 0; i < st.range(0); ++i) {
    Request r;
    r.id = 1'000 + i;
    r.team = s.teams[0].name;
    r.submittedAt = i;
    r.gpus = 1;
    s.pending.push_back(r);
  }
  passesOverTheQueue(st, s);
}
BENCHMARK(ShortJobStream)->Arg(2'000)->Unit(benchmark::kMillisecond);

// Peak bytes one pass allocates (the scheduler's own state: the fleet's placement model, quota
// books, per-request bookkeeping), per GPU, at 10,000 hosts x 8 GPUs with 40,000 queued.
void Memory(benchmark::State& st) {
  Snapshot s = fleet(10'000, 8);
  queue(s, 40'000, 3);
  double perGpu = 0;
  for (auto _ : st) {
    live = 0;
    peak = 0;
    counting = true;
    auto d = decide(s);
    counting = false;
    benchmark::DoNotOptimize(d);
    perGpu = double(peak.load()) / 80'000.0;
  }
  st.counters["peak_bytes_per_gpu"] = perGpu;
}
BENCHMARK(Memory)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
