#pragma once
// Executor: runs the host's jobs and reports their actual state. The agent's connection loop
// turns allotd's desired state into start()/stop()/forget() calls and reports poll()'s answer.
//
// Implementations are driven from one thread (the agent's loop); none is thread-safe. Jobs
// outlive the Executor: destroying it leaves them running, and a new Executor over the same
// state re-adopts them (the agent restarted).

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/agent_protocol.h"

namespace allot::agent {

// The image a job runs in (docs/environments.md): its layers as the image store unpacked them,
// and what the image's config says a container runs.
struct ContainerImage {
  std::string ref, digest;
  std::string layersRoot;           // the store's layers/ directory
  std::vector<std::string> layers;  // hex digests, topmost first (overlayfs' lowerdir order)
  std::vector<std::string> entrypoint, cmd, env;
  std::string workingDir;
  std::string crun = "/usr/bin/crun";
  std::string hostDevDir = "/dev";  // where the host's device nodes are (tests use their own)
};

struct JobSpec {
  int64_t id = 0;
  std::vector<std::string> command;  // argv; command[0] is looked up in PATH
  std::map<std::string, std::string> env;
  std::vector<std::string> gpuUuids;  // become CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES
  std::vector<int> gpuIndices;
  std::vector<int> gpuMinors;  // /dev/nvidia<minor> the job may open when realGpus
  bool realGpus = false;       // false for simulated GPUs: no device rules to write
  int64_t memoryLimitMib = 0;  // 0 = no limit
  int cpuMillis = 0;           // 0 = no limit; 1000 = one CPU
  // Whom the workload runs as (its submitter's uid and gid, its team's gid as a supplementary
  // group); absent when allotd knows none. An executor that switches users refuses a job
  // without one.
  std::optional<model::RunAs> runAs;
  // An interactive session (docs/sessions.md): recorded in spec.json, where the Jupyter fork
  // server (root) reads it to serve session jobs only.
  bool session = false;
  // Where the command starts: entered by the job's process once it is its owner, so it reaches
  // only what the owner may; "" = the job's own directory (workPath).
  std::string workdir;
  // Set: the command runs in this image, under crun, instead of on the host.
  std::optional<ContainerImage> image;
  // More host directories a container sees at the same path, read-write (a session's local or
  // shared storage); its scratch, work directory and team directory are always there.
  std::vector<std::string> binds;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Starts the job; returns its state: running, or failed_to_start with a message. Starting a
  // job it already knows returns that job's state and starts nothing.
  virtual model::ActualJob start(const JobSpec& spec) = 0;
  // Starts several jobs, side by side where the executor can; their states, in `specs`' order.
  virtual std::vector<model::ActualJob> startAll(const std::vector<JobSpec>& specs) {
    std::vector<model::ActualJob> out;
    for (const auto& spec : specs) out.push_back(start(spec));
    return out;
  }
  // SIGTERM to the job's whole tree now, SIGKILL to whatever is left after graceMs (enforced by
  // poll()). Stopping a job that is already stopping keeps the earlier deadline.
  virtual void stop(int64_t id, int64_t graceMs) = 0;
  // Re-checks every job (reaps children, escalates kills, notices exits) and returns the state of
  // every job it knows, running and finished.
  virtual std::vector<model::ActualJob> poll() = 0;
  // Forgets a finished job and removes its working directory; allotd has recorded its end. A job
  // still running is killed first.
  virtual void forget(int64_t id) = 0;
  virtual bool knows(int64_t id) const = 0;
  // The GPU indexes the job was started with (also for re-adopted jobs); empty when unknown.
  virtual std::vector<int> gpusOf(int64_t id) const = 0;
  // The job's main process (its process group); 0 when it has none running.
  virtual int pidOf(int64_t) const { return 0; }
  // The process whose exit means the job's outcome is recorded (its shim), while the job runs;
  // 0 when there is none to watch. The agent wakes on its exit (ExitWatch).
  virtual int shimPidOf(int64_t) const { return 0; }
  // The cgroup directories confining the job; empty when it runs unconfined. What joins them
  // later (a session's sshd) is limited and accounted with the job.
  virtual std::vector<std::string> cgroupsOf(int64_t) const { return {}; }
  // A job in an image: crun's state file of its container and its bundle's config.json, for
  // logins into it (allot-ssh-bridge); nullopt for a process job or one not running.
  struct ContainerFiles {
    std::string state, config;
  };
  virtual std::optional<ContainerFiles> containerOf(int64_t) const { return std::nullopt; }
  // The job's combined stdout+stderr file.
  virtual std::string logPath(int64_t id) const = 0;
  // The job's working directory (its owner's; a session's Jupyter socket is there).
  virtual std::string workPath(int64_t id) const = 0;
  // Job cgroup directories that no running job holds (jobs that ended, forgotten jobs, an earlier
  // agent's): where processes a job left behind may still be. The wipe kills what is in them.
  virtual std::vector<std::string> leftoverCgroups() const { return {}; }
  // The images that jobs not yet ended run in, re-adopted ones included: their references and
  // the layers their containers mount. The image store keeps them (ImageStore::setInUse).
  struct ImagesInUse {
    std::set<std::string> refs, layers;
  };
  virtual ImagesInUse imagesInUse() const { return {}; }
};

}  // namespace allot::agent
