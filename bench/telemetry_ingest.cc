// allotd's telemetry ingest: how many GPU samples a second the control plane takes in, from the
// text of an agent's telemetry message to rows committed in telemetry.db. A fleet of 1,000 GPUs
// (125 hosts of 8, every GPU held by a running job) reports for --rounds simulated seconds; each
// message goes through what allotd does with one: JSON parse, validation against the host, the
// live view, attribution to the holding allocation, and, once per simulated second, the hand-over
// to TelemetryStore, whose writer commits raw samples, per-minute and per-hour rollups and usage
// in its own thread. The WebSocket framing around a message is not included. The target is
// 50,000 samples a second. Numbers in docs/benchmarks.md.
//
//   build/bin/telemetry_ingest --rounds 300

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/secrets.h"
#include "control/cluster.h"
#include "telemetry/telemetry_store.h"

namespace allot {
namespace {

class NullLink : public control::AgentLink {
 public:
  void send(std::string) override {}
};

model::Inventory inventory(int gpus) {
  model::Inventory inv;
  inv.hostname = "h";
  inv.cpus = 64;
  inv.memoryMib = 1 << 20;
  inv.gpuProvider = "simulated";
  inv.simulated = true;
  for (int i = 0; i < gpus; ++i)
    inv.gpus.push_back({i, "GPU-" + std::to_string(i), i, "H100", 81920, 0, "", "", "", false});
  return inv;
}

int run(int rounds, int hosts, int gpusPerHost) {
  initSecrets();
  spdlog::set_level(spdlog::level::warn);  // 125 hosts joining need not be told
  const auto dir =
      std::filesystem::temp_directory_path() / ("allot-ingest-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  FakeClock clock(1'767'225'600'000);
  control::LogStore logs((dir / "logs").string());
  if (!logs.init().ok()) return 1;
  control::Cluster cluster(clock, logs, {});
  auto admin = *cluster.access().authenticate(cluster.access().bootstrapAdmin()->value);
  (void)cluster.access().createTeam(admin, "ml");
  auto alice = *cluster.access().authenticate(
      cluster.access().createUser(admin, "alice", "ml", model::Role::kMember)->value.token);
  NullLink link;
  std::vector<std::string> names;
  for (int h = 0; h < hosts; ++h) {
    names.push_back("gpu-" + std::to_string(h));
    auto jt = cluster.hosts().createJoinToken(admin, 3'600'000);
    (void)cluster.hosts().joinHost(jt->value.secret, names.back(), inventory(gpusPerHost));
    cluster.agentConnected(names.back(), &link, inventory(gpusPerHost), {});
  }
  for (int j = 0; j < hosts * gpusPerHost; ++j) {
    control::JobRequest r;
    r.command = {"python", "train.py"};
    r.resources.gpus = 1;
    (void)cluster.submitJob(alice, r);
  }
  auto pass = cluster.schedulePass();
  cluster.passDurable(pass.value);
  std::printf("fleet: %d hosts x %d GPUs, %zu jobs placed\n", hosts, gpusPerHost,
              pass.value.placed.size());

  auto store = telemetry::TelemetryStore::open((dir / "telemetry.db").string(), {}, clock);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().toString().c_str());
    return 1;
  }
  // Every message as its agent would send it, encoded before the clock starts.
  std::vector<std::string> messages;
  messages.reserve(static_cast<size_t>(rounds) * hosts);
  for (int r = 0; r < rounds; ++r) {
    for (int h = 0; h < hosts; ++h) {
      model::Telemetry t{names[h], clock.nowMs() + (r + 1) * 1000, 1000, {}};
      for (int g = 0; g < gpusPerHost; ++g) {
        model::GpuSample s;
        s.index = g;
        s.utilizationPct = (r * 7 + g * 13 + h) % 101;
        s.memoryUsedMib = 40'000 + g;
        s.temperatureC = 61;
        s.powerW = 512.5;
        s.smClockMhz = 1980;
        s.eccCorrected = 0;
        s.eccUncorrected = 0;
        s.pids = {1000 + g};
        t.gpus.push_back(s);
      }
      messages.push_back(model::toJson(t).dump());
    }
  }

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  size_t samples = 0, rejected = 0;
  for (int r = 0; r < rounds; ++r) {
    clock.advance(1000);
    for (int h = 0; h < hosts; ++h) {
      const std::string& text = messages[static_cast<size_t>(r) * hosts + h];
      auto t = model::telemetryFromJson(nlohmann::json::parse(text));
      if (!t.ok() || !cluster.agentTelemetry(names[h], *t).ok()) {
        ++rejected;
        continue;
      }
      samples += t->gpus.size();
    }
    (*store)->submit(cluster.accounting().drainTelemetry());
  }
  const auto ingested = Clock::now();
  (*store)->flush();
  const auto committed = Clock::now();
  auto secs = [](auto d) { return std::chrono::duration<double>(d).count(); };
  std::printf("samples: %zu in %d rounds (%zu messages rejected)\n", samples, rounds, rejected);
  std::printf("control-plane thread: %.3f s, %.0f samples/s\n", secs(ingested - start),
              samples / secs(ingested - start));
  std::printf("until committed in telemetry.db: %.3f s, %.0f samples/s\n", secs(committed - start),
              samples / secs(committed - start));
  std::printf("committed: %llu samples\n",
              static_cast<unsigned long long>((*store)->samplesCommitted()));
  store->reset();
  std::filesystem::remove_all(dir);
  return rejected == 0 ? 0 : 1;
}

}  // namespace
}  // namespace allot

int main(int argc, char** argv) {
  CLI::App app{"allotd telemetry ingest benchmark"};
  int rounds = 300, hosts = 125, gpus = 8;
  app.add_option("--rounds", rounds, "simulated seconds of sampling at 1 Hz (default 300)");
  app.add_option("--hosts", hosts, "hosts (default 125)");
  app.add_option("--gpus-per-host", gpus, "GPUs per host (default 8)");
  CLI11_PARSE(app, argc, argv);
  return allot::run(rounds, hosts, gpus);
}
