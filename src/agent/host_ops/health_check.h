#pragma once
// The health check a host passes before it takes work (commissioning, after a handover, and
// periodically): what allotd expects of it (model::HealthStep) against what the GPU provider,
// the file system and, optionally, a compute burn-in say. Every finding is one line in
// HealthReport::problems; none means healthy.
//
// Bounded in time: provider calls are single queries, and the burn-in (burnInMs per GPU) is waited
// for at most 30 s longer, then reported failed (a hung GPU can block a CUDA call for ever).
// Threading: runs on the host task's thread; `gpus` must be safe to call from it (the agent passes
// a LockedGpuProvider).

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu/gpu_provider.h"
#include "agent/host_ops/burn_in.h"
#include "model/agent_protocol.h"

namespace allot::agent {

struct HealthCheckOptions {
  model::HealthStep step;
  GpuProvider* gpus = nullptr;
  std::string diskPath;             // the agent's work directory: its file system is checked
  std::vector<XidEvent> xidEvents;  // critical XIDs seen since the agent started
  // When set, called when the check runs for those instead (the agent's history then, not when
  // the task started: a hook may run for minutes). Called on the task's thread.
  std::function<std::vector<XidEvent>()> xidSource;
  std::string cudaLibrary = kDefaultCudaLibrary;
};

// Runs the check. Each line of its account also goes to onLine (with its '\n') as it is made.
model::HealthReport runHealthCheck(const HealthCheckOptions& options,
                                   const std::function<void(std::string_view)>& onLine = nullptr);

// The report as lines for people (the task's output).
std::string describeHealth(const model::HealthReport& report);

}  // namespace allot::agent
