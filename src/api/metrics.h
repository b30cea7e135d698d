#pragma once
// Prometheus metrics of allotd, served at GET /metrics in the text exposition format (0.0.4).
//
// What allotd measures as it goes (request and scheduling-pass latencies) lives in
// ServerMetrics; everything else (hosts, GPUs and who holds them, jobs by state, queue length,
// team quota positions) is read from the world when scraped, so nothing here can drift from it.
// Per-GPU telemetry (utilisation, memory, temperature, power, SM clock, ECC counts) is the latest
// sample the host's agent sent, labelled with who holds the GPU while it is allocated.
// Job counters are derived from the world too: jobs are never deleted, so the number that ended
// in each state only grows, across restarts included.
//
// Threading: allotd's one I/O thread records and renders.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "control/world.h"

namespace allot::api {

// A cumulative histogram with fixed upper bounds (seconds), as Prometheus wants it.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends `name_bucket{...,le=...}`, `name_sum` and `name_count` lines; `labels` is either
  // empty or `key="value",...` without braces.
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; one more for +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct ServerMetrics {
  ServerMetrics();
  // One API request: the route's pattern (bounded cardinality), method, status and seconds.
  void request(const std::string& route, const std::string& method, int status, double seconds);
  // A pass: `seconds` from snapshot to applied, `ioSeconds` of them on the I/O thread (the rest
  // is the decision, on the scheduler's thread).
  void schedulingPass(double seconds, double ioSeconds, size_t placed);
  // One telemetry round from an agent, taken in or rejected.
  void telemetryRound(size_t samples, bool accepted) {
    (accepted ? telemetrySamples : telemetryRejected) += samples;
  }

  // An agent's hello or status: the desired states it refused since it started. A rise is logged
  // (version skew between allotd and the agent, docs/agent.md).
  void agentReport(const std::string& host, int64_t refusedDesired);

  std::map<std::tuple<std::string, std::string, int>, uint64_t> requests;
  std::map<std::string, Histogram> requestSeconds;  // by route
  Histogram passSeconds;
  Histogram passIoSeconds;
  uint64_t passes = 0;
  uint64_t placements = 0;
  uint64_t telemetrySamples = 0;
  uint64_t telemetryRejected = 0;
  // Connections closed at once for being over the connection limits (api/connection_limit.h).
  uint64_t connectionsRefused = 0;
  // Idle connections closed to make room for a new one (ConnectionLimiter::closedForRoom).
  uint64_t idleConnectionsClosed = 0;
  std::map<std::string, int64_t> desiredRefused;  // by host, as its agent last reported
};

// `now` decides which GPU telemetry is current: a GPU whose agent has not reported for three of
// its intervals has no telemetry series, rather than its last readings forever.
std::string renderMetrics(const control::World& world, const ServerMetrics& metrics, TimeMs now);

// `a\"b` for a label value: backslash, double quote and newline escaped.
std::string escapeLabel(const std::string& value);

}  // namespace allot::api
