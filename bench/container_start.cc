// Start to process running, for a job in an image against the same job as a plain process, on
// the agent's executor (no allotd: what the container path adds to a start).
//
//   build/bin/container_start [--jobs 100]
//
// The image is one layer made from busybox and the static start_stamp (next to this binary), as
// the image store would have unpacked it. Each job runs `start_stamp FILE` (FILE in its scratch,
// bound into the container at the same path); the latency is the stamp minus CLOCK_REALTIME
// taken just before ProcessExecutor::start(). Jobs run one at a time with one standby shim, as
// the agent runs them. Needs root and writable cgroups (as the agent does).

#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "agent/exec/cgroup_manager.h"
#include "agent/exec/container_config.h"
#include "agent/exec/process_executor.h"
#include "common/clock.h"

namespace {

namespace fs = std::filesystem;
using allot::agent::ContainerImage;
using allot::agent::JobSpec;

long long nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

std::string besideThisBinary(const std::string& name) {
  return (fs::read_symlink("/proc/self/exe").parent_path() / name).string();
}

// Runs `jobs` jobs one at a time; their latencies in ms, sorted.
std::vector<double> run(allot::agent::ProcessExecutor& exec, const std::string& scratch,
                        int64_t firstId, int jobs, const std::optional<ContainerImage>& image) {
  std::vector<double> out;
  for (int i = 0; i < jobs; ++i) {
    JobSpec spec;
    spec.id = firstId + i;
    const std::string stamp = scratch + "/" + std::to_string(spec.id) + "/stamp";
    spec.command = {image ? "/start_stamp" : besideThisBinary("start_stamp"), stamp};
    spec.image = image;
    const long long t0 = nowNs();
    auto started = exec.start(spec);
    if (started.state == allot::model::ActualState::kFailedToStart) {
      throw std::runtime_error("job " + std::to_string(spec.id) +
                               " did not start: " + started.message);
    }
    for (int spin = 0; spin < 20000; ++spin) {
      bool ended = false;
      for (const auto& a : exec.poll())
        if (a.id == spec.id && a.state != allot::model::ActualState::kRunning) ended = true;
      if (ended) break;
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    long long stamped = 0;
    std::ifstream(stamp) >> stamped;
    if (stamped == 0) {
      throw std::runtime_error("job " + std::to_string(spec.id) + " wrote no stamp");
    }
    out.push_back(static_cast<double>(stamped - t0) / 1e6);
    exec.forget(spec.id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void report(const char* what, const std::vector<double>& ms) {
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  std::printf("container_start %s jobs=%zu p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", what,
              ms.size(), at(0.5), at(0.9), at(0.99), ms.back());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"container start latency against a process job's, on the executor"};
  int jobs = 100;
  app.add_option("--jobs", jobs, "jobs of each kind (default 100)");
  CLI11_PARSE(app, argc, argv);

  char tmpl[] = "/tmp/allot-container-start-XXXXXX";
  const std::string work = mkdtemp(tmpl);
  const std::string layer = work + "/layers/" + std::string(64, 'c');
  fs::create_directories(layer + "/bin");
  fs::copy_file("/bin/busybox", layer + "/bin/busybox");
  fs::create_symlink("busybox", layer + "/bin/sh");
  fs::copy_file(besideThisBinary("start_stamp"), layer + "/start_stamp");
  ContainerImage image;
  image.ref = "bench.local/busybox:1";
  image.digest = "sha256:" + std::string(64, 'd');
  image.layersRoot = work + "/layers";
  image.layers = {std::string(64, 'c')};

  allot::SystemClock clock;
  allot::agent::CgroupManager cgroups("allot-bench-container");
  try {
    allot::agent::ProcessExecutor exec(work + "/agent", besideThisBinary("allot-job-shim"), clock,
                                       &cgroups, 1);
    // The agent's seccomp filter for containers (agent_main.cc).
    exec.setSeccomp(allot::agent::hostContainerSeccomp());
    const std::string scratch = work + "/agent/scratch";
    // Alternated in rounds, so that the machine's drift falls on both alike.
    std::vector<double> processMs, containerMs;
    const int rounds = 5;
    for (int r = 0; r < rounds; ++r) {
      auto p = run(exec, scratch, 1 + r * 2 * jobs, jobs / rounds, std::nullopt);
      auto c = run(exec, scratch, 1 + r * 2 * jobs + jobs, jobs / rounds, image);
      processMs.insert(processMs.end(), p.begin(), p.end());
      containerMs.insert(containerMs.end(), c.begin(), c.end());
    }
    std::sort(processMs.begin(), processMs.end());
    std::sort(containerMs.begin(), containerMs.end());
    report("process", processMs);
    report("image", containerMs);
  } catch (const std::exception& e) {
    std::cerr << "container_start: " << e.what() << "\n";
    fs::remove_all(work);
    return 1;
  }
  fs::remove_all(work);
  return 0;
}
