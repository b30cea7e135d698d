#pragma once
// Runs a host task's steps in order, wipe -> hook -> health check, each only when the task has
// it, stopping at the first that fails, and says what happened (model::HostTaskResult). Every
// step's output goes, as it comes, to `outputFile` (truncated first), which the agent streams to
// allotd as task_output while the task runs; the result keeps the last kMaxHookOutput bytes.
//
// Threading: blocks for as long as the steps take; the agent runs it on a thread of its own
// (std::async). What it is given must be safe to use from that thread (see LockedGpuProvider).

#include <string>

#include "agent/exec/hook_runner.h"
#include "agent/host_ops/health_check.h"
#include "agent/host_ops/wipe.h"
#include "model/agent_protocol.h"

namespace allot::agent {

struct HostTaskContext {
  WipeOptions wipe;           // its step is the task's
  HookRun hook;               // its spec is the task's; onOutput is set by the runner
  HealthCheckOptions health;  // its step is the task's
  std::string outputFile;     // "" = not written
};

model::HostTaskResult runHostTask(const model::HostTask& task, HostTaskContext context);

}  // namespace allot::agent
