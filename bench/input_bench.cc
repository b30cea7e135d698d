// What the bounds on foreign input cost a request (docs/access.md, "The request path"): the
// nesting pre-scan before every JSON parse, the parse itself for comparison, and the UTF-8 check
// of path and query parameters.
//
//   build/bin/input_bench

#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/bounded_json.h"
#include "common/utf8.h"

namespace {

// A job submission as the CLI sends one, padded with an environment of `envBytes`.
std::string jobBody(size_t envBytes) {
  nlohmann::json j = {{"team", "ml"},
                      {"command", {"python3", "train.py", "--lr", "3e-4", "--epochs", "10"}},
                      {"gpus", 2},
                      {"env", {{"SEED", "1"}, {"HF_HOME", "/data/hf"}}}};
  if (envBytes > 0) j["env"]["PAD"] = std::string(envBytes, 'x');
  return j.dump();
}

// Times `step` over a job body padded by the benchmark's argument (bodyPaddings), per byte.
template <typename Step>
void overJobBody(benchmark::State& state, Step step) {
  const std::string body = jobBody(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(step(body));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}
// A plain submission, and ones padded to 256 KiB and to 900 KiB.
void bodyPaddings(benchmark::internal::Benchmark* b) { b->Arg(0)->Arg(256 << 10)->Arg(900 << 10); }

void BM_NestingScan(benchmark::State& state) {
  overJobBody(state, [](const std::string& body) { return allot::jsonNestingWithin(body); });
}
BENCHMARK(BM_NestingScan)->Apply(bodyPaddings);

void BM_PlainParse(benchmark::State& state) {
  overJobBody(state,
              [](const std::string& body) { return nlohmann::json::parse(body, nullptr, false); });
}
BENCHMARK(BM_PlainParse)->Apply(bodyPaddings);

void BM_BoundedParse(benchmark::State& state) {
  overJobBody(state, [](const std::string& body) { return allot::parseBoundedJson(body); });
}
BENCHMARK(BM_BoundedParse)->Apply(bodyPaddings);

void BM_Utf8Check(benchmark::State& state) {
  const std::string param = "caf\xC3\xA9-" + std::string(static_cast<size_t>(state.range(0)), 'a');
  for (auto _ : state) benchmark::DoNotOptimize(allot::isValidUtf8(param));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * param.size()));
}
BENCHMARK(BM_Utf8Check)->Arg(16)->Arg(1024);

}  // namespace

BENCHMARK_MAIN();
