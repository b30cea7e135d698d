#pragma once
// The OCI runtime spec (config.json) the agent writes for a job that runs in an image
// (docs/environments.md, "Running in an image"): what crun runs, as whom, with what it may see.
//
// The process: the image's entrypoint followed by the job's command (or the image's cmd when the
// job gives none); the environment is the image's, then the job's, then Allot's own variables
// (ALLOT_*, CUDA_VISIBLE_DEVICES), so that a job cannot widen its GPUs; its user is the job's
// owner (uid, gid, the team's group) when workloads run as their owners, else the agent's (0),
// with every capability set empty and no new privileges either way. Namespaces: mount, PID and
// IPC of its own; the host's network, as for a process job. Mounts: /proc, a /dev tmpfs with
// crun's default devices, /dev/pts, /dev/shm, /sys read-only, and the job's own directories
// bind-mounted at their host paths (scratch, working directory, the team's directory), so
// $ALLOT_SCRATCH and $HOME mean the same inside. GPUs: the job's /dev/nvidiaN and the driver's
// shared nodes (nvidiactl, nvidia-uvm, nvidia-uvm-tools) where the host has them, and the
// host's driver libraries and tools read-only (driver_files.h, with their directories added to
// LD_LIBRARY_PATH and PATH); the device
// cgroup rules stay the executor's, on the job's groups, as for a process job (crun runs with its
// cgroup manager disabled, in the groups the shim joined).

#include <string>
#include <vector>

#include "agent/exec/driver_files.h"
#include "agent/exec/executor.h"
#include "common/status.h"

namespace allot::agent {

struct ContainerPlaces {
  std::vector<std::string> binds;  // host directories mounted at the same path, read-write
  std::string cwd;                 // inside the container
  // The host's driver files, mounted read-only (a job with real GPUs; driver_files.h).
  std::vector<DriverFile> driverFiles;
  // linux.seccomp as JSON text (ociSeccomp()); "" = no filter.
  std::string seccomp;
  // The same filter compiled (seccomp_bpf.h), base64; "" = crun compiles linux.seccomp.
  std::string seccompBpf;
};

// The OCI runtime spec's linux.seccomp for a container with no capabilities on this machine's
// architecture, from a profile in the containers-common / Docker form
// (/usr/share/containers/seccomp.json, what podman gives containers by default): rules that need
// a capability are left out, rules for when a capability is missing are kept, and rules for
// other architectures are left out. "" when `profileJson` is not such a profile.
std::string ociSeccomp(const std::string& profileJson);

// Where containers-common keeps the profile podman gives containers.
inline constexpr const char* kContainerSeccompProfile = "/usr/share/containers/seccomp.json";
// ociSeccomp() of that file; "" when it is missing or not a profile.
std::string hostContainerSeccomp();

// The config.json text. `allotEnv` is what jobEnvironment() gave the job (KEY=VALUE);
// `runAsOwner`: the job runs as spec.runAs, else as uid 0 without capabilities.
std::string containerConfig(const JobSpec& spec, const std::vector<std::string>& allotEnv,
                            const ContainerPlaces& places, bool runAsOwner);

// Whether crun (root) may bind-mount host directory `dir` into a container: an absolute path
// whose every component is a real directory (no link), and which no one but root can swap for a
// link between this check and the mount. Each directory on the way is root's and writable by no
// one else, or sticky (as /tmp) with the next component root's: under a sticky directory an
// entry's owner may still rename it, and `dir`'s owner is the job's. Otherwise a workload could
// point the mount at any directory of the host, past the permissions of the directories above it
// (the image store's layers of another team's image, for one). FailedPrecondition naming the
// component that fails.
Status checkBindSource(const std::string& dir);

// The argv of the container's process (entrypoint + command, or + cmd); empty when neither the
// image nor the job names one.
std::vector<std::string> containerArgs(const JobSpec& spec);

}  // namespace allot::agent
