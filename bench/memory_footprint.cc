// allotd memory with a realistic history: 100 hosts (8 GPUs each) and 10,000 finished jobs.
//
//   build/bin/memory_footprint                           # 100 hosts, 10000 jobs
//   build/bin/memory_footprint --hosts 100 --jobs 10000 --rounds 3
//   ALLOT_BENCH_DIR=/some/disk build/bin/memory_footprint
//
// Starts allotd once on a fresh data dir (creating the admin, as on any new install), stops it,
// fills the store through SqliteStore with the rows allotd itself writes (teams, users, API
// tokens, one credential per host, hosts with full GPU inventories, jobs with commands, env, GPU
// UUIDs and exit codes), starts allotd on it again (from --allotd, default next to this binary),
// then makes --rounds rounds of list requests (GET /api/v1/jobs?limit=N, GET /api/v1/hosts,
// GET /api/v1/jobs, GET /api/v1/hosts/NAME) and reads VmRSS and VmHWM from /proc/PID/status
// after the start and after the requests. No agent connects, so the hosts load as unreachable;
// the jobs are all terminal.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "store/sqlite/sqlite_store.h"

namespace {

using namespace allot;
using SteadyClock = std::chrono::steady_clock;

constexpr int kGpusPerHost = 8;
constexpr TimeMs kEpoch = 1'767'225'600'000;  // 2026-01-01

int fail(const std::string& msg) {
  std::cerr << "memory_footprint: " << msg << "\n";
  return 1;
}

std::string fakeUuid(int host, int gpu) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%08x-%04x-%04x-%04x-%012x", 0x5eed0000u + host, gpu, 0x4a1e,
                0x8000 + host, 0x1000000u + static_cast<unsigned>(host * 8 + gpu));
  return buf;
}

model::Host makeHost(int i) {
  model::Host h;
  char name[32];
  std::snprintf(name, sizeof name, "gpu-%03d", i);
  h.name = name;
  h.state = model::HostState::kOnline;
  h.gpuProvider = "nvml";
  h.cpus = 128;
  h.memoryMib = 2 * 1024 * 1024;
  for (int g = 0; g < kGpusPerHost; ++g) {
    model::Gpu gpu;
    gpu.index = g;
    gpu.uuid = fakeUuid(i, g);
    gpu.minor = g;
    gpu.model = "NVIDIA H100 80GB HBM3";
    gpu.memoryMib = 81559;
    gpu.numaNode = g / 4;
    gpu.driverVersion = "550.54.15";
    gpu.cudaVersion = "12.4";
    h.gpus.push_back(gpu);
  }
  h.agentVersion = "0.1.0";
  h.cgroup = "v2";
  h.joinedAt = kEpoch;
  h.lastSeenAt = kEpoch + 86'400'000;
  return h;
}

model::Job makeJob(int64_t id, const std::vector<model::Host>& hosts) {
  static const char* kTeams[] = {"vision", "nlp", "speech", "infra"};
  static const char* kUsers[] = {"alice", "bob", "carol", "dave"};
  model::Job j;
  j.id = id;
  int t = static_cast<int>(id % 4);
  j.team = kTeams[t];
  j.project = std::string(kTeams[t]) + "-main";
  j.user = kUsers[t];
  j.name = "train-" + std::to_string(id);
  j.command = {"python3",
               "-m",
               "torch.distributed.run",
               "--nproc_per_node=8",
               "train.py",
               "--config=configs/" + std::string(kTeams[t]) + "/large.yaml",
               "--output-dir=/data/runs/" + std::to_string(id),
               "--seed=" + std::to_string(id)};
  j.env = {{"WANDB_MODE", "offline"},
           {"NCCL_DEBUG", "WARN"},
           {"HF_HOME", "/data/cache/huggingface"},
           {"RUN_ID", "run-" + std::to_string(id)}};
  j.resources.gpus = 1 << (id % 4);  // 1, 2, 4, 8
  if (id % 3 == 0) j.resources.gpuModels = {"H100"};
  const model::Host& h = hosts[static_cast<size_t>(id) % hosts.size()];
  model::Rank& placed = j.ranks.emplace_back();
  placed.host = h.name;
  for (int g = 0; g < j.resources.gpus; ++g) {
    placed.gpuIndices.push_back(g);
    placed.gpuUuids.push_back(h.gpus[static_cast<size_t>(g)].uuid);
  }
  j.submittedAt = kEpoch + id * 60'000;
  j.scheduledAt = j.submittedAt + 150;
  j.startedAt = j.scheduledAt + 40;
  j.finishedAt = j.startedAt + 3'600'000;
  if (id % 10 == 0) {
    j.state = model::JobState::kFailed;
    j.exitCode = 1;
    j.reason = "exited with code 1";
  } else if (id % 25 == 0) {
    j.state = model::JobState::kCancelled;
    j.signal = 15;
    j.reason = "cancelled by " + j.user;
  } else {
    j.state = model::JobState::kSucceeded;
    j.exitCode = 0;
    j.reason = "exited with code 0";
  }
  return j;
}

Status populate(const std::string& dataDir, int hostCount, int jobCount) {
  auto opened = store::SqliteStore::open(dataDir + "/allot.db");
  if (!opened.ok()) return opened.status();
  auto& st = **opened;
  store::WriteBatch org;
  for (const char* team : {"vision", "nlp", "speech", "infra"}) {
    model::Team t;
    t.name = team;
    t.createdAt = kEpoch;
    model::Project p;
    p.name = std::string(team) + "-main";
    p.team = team;
    p.createdAt = kEpoch;
    org.add(store::PutTeam{t});
    org.add(store::PutProject{p});
  }
  const char* users[][2] = {
      {"alice", "vision"}, {"bob", "nlp"}, {"carol", "speech"}, {"dave", "infra"}};
  int tokenSeq = 1000;
  for (auto& u : users) {
    org.add(store::PutUser{
        {.name = u[0], .teams = {{u[1], model::Role::kMember}}, .createdAt = kEpoch}});
    org.add(store::PutToken{
        {"tok-" + std::to_string(tokenSeq++), u[0], std::string(64, 'a'), kEpoch, 0}});
  }
  std::vector<model::Host> hosts;
  for (int i = 0; i < hostCount; ++i) {
    hosts.push_back(makeHost(i));
    org.add(store::PutHost{hosts.back()});
    org.add(store::PutToken{{"tok-" + std::to_string(tokenSeq++), "host:" + hosts.back().name,
                             std::string(64, 'b'), kEpoch, 0}});
  }
  ALLOT_RETURN_IF_ERROR(st.commit(std::move(org)));
  for (int64_t id = 1; id <= jobCount;) {
    store::WriteBatch b;
    for (int k = 0; k < 500 && id <= jobCount; ++k, ++id) b.add(store::PutJob{makeJob(id, hosts)});
    ALLOT_RETURN_IF_ERROR(st.commit(std::move(b)));
  }
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"memory_footprint: allotd RSS with many hosts and finished jobs"};
  std::string allotd = bench::selfDir() + "/allotd";
  int hostCount = 100, jobCount = 10000, rounds = 3;
  bool keep = false;
  app.add_option("--allotd", allotd, "allotd binary (default: next to this one)");
  app.add_option("--hosts", hostCount, "hosts in the store")->check(CLI::Range(1, 100000));
  app.add_option("--jobs", jobCount, "finished jobs in the store")->check(CLI::Range(1, 1000000));
  app.add_option("--rounds", rounds, "rounds of list requests")->check(CLI::Range(1, 100));
  app.add_flag("--keep", keep, "keep the data dir");
  CLI11_PARSE(app, argc, argv);

  std::printf("machine: %s\n", bench::machineLine().c_str());
  auto dir = bench::makeScratchDir("allot-memory");
  if (!dir.ok()) return fail(dir.status().toString());
  // A first start creates the admin (and admin.token) as on any new install; the history is
  // then written while allotd is down, and the second start loads it.
  {
    auto first = bench::startAllotd(allotd, *dir);
    if (!first.ok()) return fail(first.status().toString());
    first->process.stop();
  }
  auto t0 = SteadyClock::now();
  Status filled = populate(*dir, hostCount, jobCount);
  if (!filled.ok()) return fail("populating the store: " + filled.toString());
  double fillS = std::chrono::duration<double>(SteadyClock::now() - t0).count();

  t0 = SteadyClock::now();
  auto server = bench::startAllotd(allotd, *dir);
  if (!server.ok()) return fail(server.status().toString());
  double startS = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  pid_t pid = server->process.pid();
  int64_t rssStart = bench::procStatusKib(pid, "VmRSS");
  int64_t hwmStart = bench::procStatusKib(pid, "VmHWM");

  const std::string& tok = server->adminToken;
  const std::string jobsAll = "/api/v1/jobs?limit=" + std::to_string(jobCount);
  size_t jobsBytes = 0, hostsBytes = 0;
  double worstJobsMs = 0, worstHostsMs = 0;
  for (int r = 0; r < rounds; ++r) {
    auto a = SteadyClock::now();
    auto jobs = bench::httpRequest(server->port, "GET", jobsAll, tok, "");
    auto b = SteadyClock::now();
    auto hosts = bench::httpRequest(server->port, "GET", "/api/v1/hosts", tok, "");
    auto c = SteadyClock::now();
    auto recent = bench::httpRequest(server->port, "GET", "/api/v1/jobs", tok, "");
    auto one = bench::httpRequest(server->port, "GET", "/api/v1/hosts/gpu-000", tok, "");
    for (auto* reply : {&jobs, &hosts, &recent, &one}) {
      if (!reply->ok() || (*reply)->status != 200)
        return fail("list request failed: " +
                    (reply->ok() ? (*reply)->body : reply->status().toString()));
    }
    auto count = nlohmann::json::parse(jobs->body).size();
    if (static_cast<int>(count) != jobCount)
      return fail("GET " + jobsAll + " returned " + std::to_string(count) + " jobs");
    jobsBytes = jobs->body.size();
    hostsBytes = hosts->body.size();
    worstJobsMs = std::max(worstJobsMs, std::chrono::duration<double, std::milli>(b - a).count());
    worstHostsMs = std::max(worstHostsMs, std::chrono::duration<double, std::milli>(c - b).count());
  }
  int64_t rssEnd = bench::procStatusKib(pid, "VmRSS");
  int64_t hwmEnd = bench::procStatusKib(pid, "VmHWM");
  std::printf("memory_footprint hosts=%d jobs=%d populate_s=%.2f allotd_start_s=%.2f\n", hostCount,
              jobCount, fillS, startS);
  std::printf("  after start:        VmRSS=%.1f MiB VmHWM=%.1f MiB\n", rssStart / 1024.0,
              hwmStart / 1024.0);
  std::printf("  after %d rounds:     VmRSS=%.1f MiB VmHWM=%.1f MiB\n", rounds, rssEnd / 1024.0,
              hwmEnd / 1024.0);
  std::printf(
      "  GET %s: %zu bytes, slowest %.1f ms; GET /api/v1/hosts: %zu bytes, slowest %.1f ms\n",
      jobsAll.c_str(), jobsBytes, worstJobsMs, hostsBytes, worstHostsMs);
  server->process.stop();
  if (!keep) bench::removeTree(*dir);
  return 0;
}
