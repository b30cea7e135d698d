// What a trivial job costs a host's agent side, in CPU: N one-GPU-like `true` jobs through the
// agent's executor (its cgroups, standby shim and shim server, as allot-agent runs them), started
// in waves of W as a scheduling pass hands a host its jobs, each forgotten once it has ended.
// No allotd and no HTTP: the agent's loop (this process) and its descendants (the shims and the
// jobs) alone, from getrusage, so the figure moves with the executor's code and not with the
// scheduler's or the database's. job_throughput.py measures the whole cluster.
//
//   build/bin/executor_churn [--jobs 4000] [--wave 8] [--shim-server on|off]
//                            [--work-dir DIR] [--state-dir DIR]
//
// Prints jobs/s, and CPU ms per job of the loop (self) and of the shim server, shims and jobs
// (children). The
// work dir defaults to a new directory in $TMPDIR, the state dir to one in /dev/shm (tmpfs, as
// /run/allot-agent is); both are removed at the end. Needs root and writable cgroups, as the
// agent does.

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "agent/exec/cgroup_manager.h"
#include "agent/exec/process_executor.h"
#include "common/clock.h"

namespace {

namespace fs = std::filesystem;
using allot::agent::JobSpec;
using allot::model::ActualState;

double cpuMs(int who) {
  rusage r{};
  getrusage(who, &r);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(r.ru_utime) + ms(r.ru_stime);
}

double monotonicS() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

// User and system CPU of a live process, from /proc (clock ticks): the shim server's, which
// getrusage counts only once it has been reaped. 0 for none.
double processCpuMs(pid_t pid) {
  if (pid <= 0) return 0;
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "re");
  if (f == nullptr) return 0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');
  unsigned long utime = 0, stime = 0;
  if (close == nullptr ||
      std::sscanf(close + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
                  &stime) != 2)
    return 0;
  return static_cast<double>(utime + stime) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string besideThisBinary(const std::string& name) {
  return (fs::read_symlink("/proc/self/exe").parent_path() / name).string();
}

std::string makeTemp(const std::string& parent, const std::string& prefix) {
  std::string tmpl = parent + "/" + prefix + "XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("cannot create a dir in " + parent);
  return tmpl;
}

// Runs `jobs` jobs in waves of `wave`; each wave is started together, polled until every job of it
// has ended (a short sleep between polls: the agent waits on the shims' pidfds instead), and
// forgotten.
void churn(allot::agent::ProcessExecutor& exec, int64_t firstId, int jobs, int wave) {
  for (int64_t next = firstId; next < firstId + jobs;) {
    std::vector<JobSpec> specs;
    for (int i = 0; i < wave && next < firstId + jobs; ++i, ++next) {
      JobSpec s;
      s.id = next;
      s.command = {"true"};
      s.env = {{"PATH", "/usr/bin:/bin"}};
      specs.push_back(std::move(s));
    }
    for (const auto& a : exec.startAll(specs)) {
      if (a.state == ActualState::kFailedToStart)
        throw std::runtime_error("job " + std::to_string(a.id) + " did not start: " + a.message);
    }
    for (int spin = 0;; ++spin) {
      bool running = false;
      for (const auto& a : exec.poll()) running = running || a.state == ActualState::kRunning;
      if (!running) break;
      if (spin > 100'000) throw std::runtime_error("a wave did not end in 20 s");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    for (const auto& s : specs) exec.forget(s.id);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU per trivial job on the agent's executor"};
  int jobs = 4000, wave = 8;
  std::string shimServer = "on", workParent, stateParent = "/dev/shm";
  app.add_option("--jobs", jobs, "jobs to run (default 4000)")->check(CLI::Range(1, 10'000'000));
  app.add_option("--wave", wave, "jobs started together (default 8)")->check(CLI::Range(1, 1000));
  app.add_option("--shim-server", shimServer, "on|off (default on)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--work-dir", workParent, "where the work dir goes (default $TMPDIR or /tmp)");
  app.add_option("--state-dir", stateParent, "where the state dir goes (default /dev/shm)");
  CLI11_PARSE(app, argc, argv);
  if (workParent.empty()) workParent = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

  const std::string work = makeTemp(workParent, "allot-churn-work-");
  const std::string state = makeTemp(stateParent, "allot-churn-state-");
  allot::SystemClock clock;
  int rc = 0;
  {
    allot::agent::CgroupManager cgroups("allot-bench-churn");
    try {
      allot::agent::ProcessExecutor exec(work, besideThisBinary("allot-job-shim"), clock, &cgroups,
                                         1, state);
      exec.setShimServer(shimServer == "on");
      churn(exec, 1, std::min(jobs, 200), wave);  // warm: standbys, recycled groups
      const pid_t server = exec.shimServerPid();
      const double self0 = cpuMs(RUSAGE_SELF);
      const double children0 = cpuMs(RUSAGE_CHILDREN) + processCpuMs(server);
      const double t0 = monotonicS();
      churn(exec, 1'000'000, jobs, wave);
      const double seconds = monotonicS() - t0;
      if (exec.shimServerPid() != server)
        throw std::runtime_error("the shim server was replaced during the run");
      const double self = cpuMs(RUSAGE_SELF) - self0;
      const double children = cpuMs(RUSAGE_CHILDREN) + processCpuMs(server) - children0;
      std::printf(
          "executor_churn jobs=%d wave=%d shim_server=%s jobs_per_s=%.0f cpu_ms_per_job=%.3f "
          "self_ms_per_job=%.3f children_ms_per_job=%.3f\n",
          jobs, wave, shimServer.c_str(), jobs / seconds, (self + children) / jobs, self / jobs,
          children / jobs);
    } catch (const std::exception& e) {
      std::cerr << "executor_churn: " << e.what() << "\n";
      rc = 1;
    }
  }
  std::error_code ec;
  fs::remove_all(work, ec);
  fs::remove_all(state, ec);
  return rc;
}
