#pragma once
// Hosts without agents, for benchmarks that need many of them: each joins allotd through the API
// with a simulated inventory and holds an agent WebSocket stream open, on which the benchmark
// sends telemetry itself. Loopback only, like the rest of bench_util.
//
// Threads: send() on different hosts may run on different threads; everything else from one.
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace allot::bench {

// allotd's arguments for a fleet of fake hosts, in a config file written under `dir` (the last
// argument): they cannot run a health check, so they go into service as they join ([health]
// commission = false); and all of them connect from 127.0.0.1, so one client may hold any number
// of connections ([limits] max_connections_per_client = 0). `limits`: more [limits] keys, one
// "key = value" per line.
std::vector<std::string> fakeFleetAllotdArgs(const std::string& dir,
                                             const std::string& limits = "");
// `limits` for a fleet where one user holds a job on every GPU: no per-user or per-team cap on
// active jobs or their memory.
inline constexpr const char* kNoActiveJobLimits =
    "max_active_jobs_per_user = 0\nmax_active_jobs_per_team = 0\n"
    "max_active_job_mib_per_user = 0\nmax_active_job_mib_per_team = 0\n";

class FakeFleet {
 public:
  // Joins `hosts` hosts named PREFIX-0.. of `gpusPerHost` simulated GPUs of `model` to allotd on
  // 127.0.0.1:port (a join token made with the admin token), then opens each one's stream.
  static Result<std::unique_ptr<FakeFleet>> join(uint16_t port, const std::string& adminToken,
                                                 int hosts, int gpusPerHost,
                                                 const std::string& prefix,
                                                 const std::string& model = "H100");
  ~FakeFleet();

  int hosts() const { return static_cast<int>(names_.size()); }
  int gpusPerHost() const { return gpusPerHost_; }
  const std::string& name(int host) const { return names_[host]; }
  // Sends one text message on a host's stream; false once the stream is broken.
  bool send(int host, const std::string& text);
  // One telemetry message of every GPU of `host` at `atMs`, GPU g at utilisation util[g] percent.
  std::string telemetry(int host, int64_t atMs, const std::vector<int>& util,
                        int64_t intervalMs = 1000) const;

 private:
  FakeFleet() = default;
  using Stream = boost::beast::websocket::stream<boost::beast::tcp_stream>;
  boost::asio::io_context io_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<Stream>> streams_;
  int gpusPerHost_ = 0;
  std::string model_;
};

}  // namespace allot::bench
