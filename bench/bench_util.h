#pragma once
// Helpers shared by the end-to-end benchmarks (submit_load, start_latency, memory_footprint):
// start allotd and agents as child processes on loopback, talk to them with a small blocking
// HTTP client, and summarise latency samples. Benchmark-only code: errors are reported as
// Status, and the drivers exit on them.
//
// Loopback only: every client here refuses any host other than 127.0.0.1, so a benchmark can
// never be pointed at a real fleet by accident.
//
// Threads: none of this is thread-safe; each driver calls it from main().

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace allot::bench {

// A child process started with fork/exec, stdout captured through a pipe. The destructor sends
// SIGTERM and waits (bounded), then SIGKILL.
class ChildProcess {
 public:
  // Starts argv[0] with the given arguments; stderr goes to `stderrPath` ("" = inherit).
  static Result<ChildProcess> start(const std::vector<std::string>& argv,
                                    const std::string& stderrPath);
  ChildProcess() = default;
  ChildProcess(ChildProcess&& o) noexcept;
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Reads stdout until a line starts with `prefix`; returns that line. Bounded by `timeout`.
  Result<std::string> waitForLine(const std::string& prefix, std::chrono::milliseconds timeout);
  // SIGTERM, wait up to 10 s, then SIGKILL.
  void stop();

 private:
  pid_t pid_ = -1;
  int stdoutFd_ = -1;
  std::string pending_;
};

// allotd on 127.0.0.1:0 with the given data dir, its port and admin token.
struct Allotd {
  ChildProcess process;
  uint16_t port = 0;
  std::string adminToken;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};
// `extraArgs` go after the defaults (e.g. {"--config", path}).
Result<Allotd> startAllotd(const std::string& allotdPath, const std::string& dataDir,
                           const std::vector<std::string>& extraArgs = {});

// One allot-agent named `name` with simulated GPUs (`gpus`, e.g. "sim:8xH100"), joined to
// `server` with a fresh join token; its work dir is workDir, its log workDir + ".log".
Result<ChildProcess> startSimAgent(const std::string& agentPath, const Allotd& server,
                                   const std::string& name, const std::string& gpus,
                                   const std::string& workDir,
                                   const std::vector<std::string>& extraFlags = {});

struct HttpReply {
  int status = 0;
  std::string body;
};
// One blocking request on a fresh connection to 127.0.0.1:port (5 s timeout). `token` may be "".
Result<HttpReply> httpRequest(uint16_t port, const std::string& method, const std::string& target,
                              const std::string& token, const std::string& body);

// A request the driver cannot go on without: its reply as JSON when the status is below 300;
// otherwise says "METHOD TARGET: what came back" on stderr and exits 1. A null `body` sends none.
nlohmann::json callOrExit(uint16_t port, const std::string& method, const std::string& target,
                          const nlohmann::json& body, const std::string& token);

// One series of allotd's /metrics, named with its labels exactly as rendered
// (`allot_jobs{state="queued"}`); -1 when it cannot be read.
double metricValue(uint16_t port, const std::string& token, const std::string& series);

// A fresh directory under $ALLOT_BENCH_DIR (default /tmp) named prefix-XXXXXX.
Result<std::string> makeScratchDir(const std::string& prefix);
void removeTree(const std::string& dir);

// The directory holding this executable (allotd and friends usually sit next to it).
std::string selfDir();

// Fields of /proc/PID/status in KiB (VmRSS, VmHWM, ...); -1 when missing.
int64_t procStatusKib(pid_t pid, const std::string& field);
// utime+stime of a process in seconds, from /proc/PID/stat.
double procCpuSeconds(pid_t pid);

// Percentile of samples (sorted in place), nearest-rank; 0 when empty.
double percentile(std::vector<double>& samples, double p);

// One line describing the machine: nproc, CPU model, 1-minute load average.
std::string machineLine();
double loadAverage1();

}  // namespace allot::bench
