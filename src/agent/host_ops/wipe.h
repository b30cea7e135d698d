#pragma once
// The wipe between tenants: leaves nothing of the previous team on the host. In order:
//   1. refuses while the executor still runs a job (allotd sends a task only to a drained host,
//      so a live job means the two disagree, and wiping under a job would destroy its work);
//   2. kills stray workload processes: every process whose environment holds ALLOT_JOB_ID= (a
//      job's and whatever it forked or daemonized; the variable is inherited), every process the
//      GPU provider sees on a GPU, and what is left in allot's job cgroups; never the agent itself
//      or its ancestors. SIGKILL, then a bounded wait until each is gone;
//   3. removes every job directory (<workDir>/jobs/*, and <stateDir>/jobs/* where job records
//      live apart), everything under the scratch root, the sessions' SSH set-ups
//      (<workDir>/session-ssh/*), earlier hook runs (<workDir>/hooks/* but the current one)
//      and, when the step says so (the storage policy's wipe_home), the contents
//      of the home root, of the sessions' local homes and of the team root;
//   4. verifies every GPU free: no process and memory used at most a small baseline, retried
//      briefly because the driver frees memory asynchronously after a process dies.
// Processes are killed before files are removed, so that nothing writes them again.
//
// Safety: roots are never removed, only their entries; a root that is a symlink is refused (it
// could point anywhere); entries are removed with std::filesystem::remove_all, which removes a
// symlink itself and never follows it.
//
// Threading: blocks (seconds); runs on the host task's thread. `gpus` must be safe to call from
// it (the agent passes a LockedGpuProvider).

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu/gpu_provider.h"
#include "model/model.h"

namespace allot::agent {

struct WipeOptions {
  model::WipeStep step;
  std::string workDir;
  std::string stateDir;                 // --state-dir; empty: the work dir holds job records
  std::string scratchDir;               // --scratch-dir; default <workDir>/scratch
  std::string homeDir;                  // --home-dir; empty: the host keeps no team home data
  std::string sessionHomeDir;           // --session-home-dir (default <workDir>/homes)
  std::string teamDir;                  // --team-dir; empty: none
  int64_t currentHookRun = 0;           // hooks/<this id> is the running task's and is kept
  std::vector<int64_t> liveJobs;        // jobs the executor still runs: the wipe refuses
  std::vector<std::string> jobCgroups;  // Executor::leftoverCgroups()
  GpuProvider* gpus = nullptr;          // null: no GPU step (tests of the file steps only)
  // Only processes whose environment also holds an entry starting with this ("NAME=value...") are
  // strays; empty: every process with ALLOT_JOB_ID. The agent passes "ALLOT_SCRATCH=<its scratch
  // root>/" so that it kills its own jobs' processes only; tests their own marker.
  std::string strayMarker;
  int64_t killWaitMs = 5000;
  int64_t gpuFreeWaitMs = 10'000;
};

struct WipeResult {
  bool ok = false;
  std::string reason;  // one line, when !ok
  std::string output;  // the account, one line per thing done
};

// The baseline memory a free GPU may still show: the driver and its context keep some (hundreds
// of MiB on large GPUs, with persistence mode), so "0 MiB used" would fail healthy hosts.
int64_t freeGpuBaselineMib(int64_t gpuMemoryMib);

// Runs the wipe. Each line of the account also goes to onLine (with its '\n') as it is written.
WipeResult runWipe(const WipeOptions& options,
                   const std::function<void(std::string_view)>& onLine = nullptr);

}  // namespace allot::agent
