#pragma once
// The agent protocol: messages on the one WebSocket an agent keeps open to allotd
// (GET /api/v1/agent/stream, authenticated with the host's credential).
//
// Level-triggered: allotd sends the whole desired state of the host whenever it changes; the
// agent sends the whole actual state of its workloads whenever it changes and with each
// heartbeat. Either side may restart at any moment; the next exchange repairs the world.
//
//   agent -> allotd  text   {"type":"hello", "inventory":{...}, "jobs":[ActualJob...],
//                            "refused_desired":N}
//   agent -> allotd  text   {"type":"status", "jobs":[ActualJob...], "refused_desired":N}
//                           (also the heartbeat)
//   agent -> allotd  binary '{"type":"log","job":ID,"offset":N}\n' followed by raw output bytes
//   agent -> allotd  text   {"type":"telemetry", "host":H, "at_ms":T, "interval_ms":N,
//   "gpus":[GpuSample...]}
//                           one per sample round (every --telemetry-interval), all GPUs
//   allotd -> agent  text   {"type":"desired", "jobs":[DesiredJob...], "heartbeat_ms":N,
//                            "task":HostTask}    (task: only while the host has one to run)
//   allotd -> agent          ... "log_keep":{"head":N,"tail":N} when allotd caps job output
//   allotd -> agent          ... "images":{"prunes":N,"prepulls":[REF...]} in the desired state
//   agent -> allotd  text   {"type":"images", "images":[...], "disk_bytes":N, ...}
//                           the host's image cache, when it changes (model/image_cache.h)
//   agent -> allotd  text   {"type":"task_output", "id":N, "offset":N, "data":"..."}
//                           the running task's output so far, in pieces, as it comes
//   agent -> allotd  text   {"type":"task_result", "id":N, "ok":B, "failed_step":S,
//                            "reason":"...", "output":"...", "hook":{...}, "health":{...}}
//
// Byte tunnels (issue 8, docs/design/sessions.md 3.1): binary messages whose first byte is 0x01
// (never '{', so never a log chunk) are tunnel frames, both ways: allotd opens streams to a
// (session, target) on the host (OPEN), the agent answers OPEN_OK or OPEN_FAIL, then DATA, WINDOW
// (per-stream credit, 256 KiB), CLOSE (half-close) and RESET. The codec is model/tunnel_frame.h;
// the ends are api/tunnel_hub.h (allotd) and agent/runtime/tunnel_endpoint.h. Tunnel frames are
// never dropped, unlike desired state (below): each side queues them in a FIFO of their own.
//
// The desired state is bounded (docs/agent.md, "Limits"): a job's command and environment (each
// at most 256 KiB, checked at submission) travel only while the agent may still have to start it,
// and only up to kDesiredSpecBudget bytes of them in one message. A job left out is sent with
// "deferred": true and no command; the agent leaves it unstarted until a later message (sent as
// earlier jobs start) carries it. A job being cancelled never carries them.
//
// A desired state the agent cannot decode whole (a job entry of a newer allotd, a bug) is refused
// whole: the agent logs why and keeps converging to the last good one, since a job left out of a
// half-read message would be stopped as not wanted. "refused_desired" counts such messages since
// the agent started; allotd shows it as allot_agent_desired_refused_total. Fields a side does not
// know are ignored, so a newer peer may add them.
//
// The task rides in the desired state rather than in a message of its own: the link keeps only
// the newest message (level-triggered), and a host that reconnects mid-task must hear it again.
// The agent runs each task id once per process and sends its result until the desired state no
// longer names it.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/image_cache.h"
#include "model/model.h"

namespace allot::model {

struct Inventory {
  std::string hostname;
  int cpus = 0;
  int64_t memoryMib = 0;
  std::vector<Gpu> gpus;
  std::string gpuProvider;  // "nvml" or "simulated"
  bool simulated = false;
  std::string agentVersion;
  std::string cgroup;      // "v1", "v2" or "none"
  std::string runAsOwner;  // "required" or "off" (allot-agent --run-as-owner)
  // The address other hosts reach this one at (allot-agent --advertise-address, or the local
  // address of its connection to allotd): a gang's MASTER_ADDR when its rank 0 runs here.
  std::string address;
  // It runs jobs in OCI images (docs/environments.md): crun, skopeo and a seccomp profile are
  // there and workloads run as their owners.
  bool images = false;
};

// The Unix identity a workload runs as (docs/access.md, "Workloads run as their owner"): its
// submitter's uid and user-private gid, and its team's gid as a supplementary group.
// The largest id a host can give: uid_t and gid_t are 32 bits, and (uid_t)-1 means "unchanged"
// to setuid and chown. Anything larger would be cut to 32 bits there, becoming another user's id
// (2^32 + 1000 is 1000) or root's group (2^32 is 0).
inline constexpr int64_t kMaxUnixId = 4'294'967'294;

struct RunAs {
  std::string user;
  int64_t uid = -1;
  int64_t gid = -1;
  std::string team;
  int64_t teamGid = -1;  // -1: the team has no group (no team directory, no extra group)
  bool operator==(const RunAs&) const = default;
};

// What the agent runs for a job that is an interactive session (docs/sessions.md).
struct DesiredSession {
  std::string app;      // "jupyter-server", "jupyter-notebook" or "command" (SessionSpec::app)
  std::string storage;  // "local", "scratch" or "shared"
  // The owner's SSH public keys as authorized_keys lines ("type blob comment", no options): the
  // session's sshd trusts these and nothing else, as of each new connection.
  std::vector<std::string> sshKeys;
  std::string user;        // its owner's Allot name: names their storage directories
  std::string sharedRoot;  // allotd's shared storage root (an NFS mount on every host); "" = none
  bool operator==(const DesiredSession&) const = default;
};

// Bytes of commands and environments one desired-state message carries at most; a single job
// over it is still sent alone (its own fields are capped at submission).
inline constexpr size_t kDesiredSpecBudget = 8u << 20;

// What an inventory may claim (validateInventory): a host larger than any built today by a wide
// margin, and still a bounded message and host listing.
inline constexpr int kMaxHostGpus = 64;
inline constexpr int kMaxHostCpus = 4096;
inline constexpr int64_t kMaxHostMemoryMib = 64LL << 20;  // 64 TiB
inline constexpr int64_t kMaxGpuMemoryMib = 1LL << 20;    // 1 TiB
inline constexpr size_t kMaxInventoryText = 256;          // names, UUIDs, versions

// A job the host should be running (or stopping, when cancel is set).
struct DesiredJob {
  int64_t id = 0;
  // Empty, with `deferred`, when this message does not carry them (see above).
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  bool deferred = false;
  std::vector<int> gpuIndices;
  std::vector<std::string> gpuUuids;
  std::vector<int> gpuMinors;  // for /dev/nvidiaN device rules
  int cpuMillis = 0;           // 0 = no CPU limit
  int64_t memoryMib = 0;       // 0 = no memory limit
  bool cancel = false;
  int64_t graceMs = 10'000;
  int64_t logOffset = 0;  // bytes of output allotd already holds
  // Absent when the submitter has no Unix identity yet: an agent that switches users refuses
  // the job rather than run it as root.
  std::optional<RunAs> runAs;
  std::optional<DesiredSession> session;
  // Rank 0 of a gang whose rendezvous port is not chosen yet: the agent picks a port free on
  // this host, sets MASTER_PORT to it and reports it (ActualJob::masterPort); the other ranks are
  // started with it (docs/scheduler.md, "Multi-host jobs").
  bool chooseMasterPort = false;
  // The directory the command starts in, entered as the job's owner; empty = the job's own
  // directory on the host.
  std::string workdir;
  // The OCI image to run the command in (a reference as model::ImageRef::str() writes it); the
  // agent pulls it first, reporting kPulling. Empty: on the host.
  std::string image;
  // The job's team's login to the image's registry (model::RegistryLogin, unsealed), while the
  // job may still start; the agent hands it to this pull only and keeps it nowhere.
  using RegistryAuth = model::RegistryAuth;
  std::optional<RegistryAuth> registryAuth;
};

// kPulling: not started yet; the host is fetching the job's image (ActualJob::pull*).
enum class ActualState { kRunning, kExited, kLost, kFailedToStart, kPulling };
const char* actualStateName(ActualState s);

// A running session as its agent sees it. The Jupyter token is made by the agent when the session
// starts and travels only on the host's authenticated stream; allotd keeps it in memory, to
// supply it when it proxies, and never stores or logs it.
struct ActualSession {
  std::string token;        // Jupyter's token; empty for a "command" session
  bool ready = false;       // Jupyter listens (its socket exists); always true for "command"
  int connections = 0;      // open Jupyter and SSH connections, as the agent counts them
  int busyKernels = 0;      // kernels executing now
  TimeMs lastActivity = 0;  // Jupyter's last_activity, or the last tunnel traffic; 0 = unknown
  // Whether the agent's last look at Jupyter got an answer. Unknown use counts as use: a session
  // whose Jupyter is slow to answer (a loaded host) is not culled for that.
  bool activityKnown = false;
  // SSH (docs/sessions.md, "SSH"): the login name the session's sshd accepts and its host key
  // ("ssh-ed25519 AAAA..."), which clients pin; both empty where the host offers no SSH.
  std::string sshUser;
  std::string sshHostKey;
  std::string sshDirect;  // "host:port" of its own listening sshd (direct port); "" = none
  // Its storage directory ($ALLOT_STORAGE) and the bytes it holds as last measured; -1 = not yet.
  std::string storagePath;
  int64_t storageBytes = -1;
  bool operator==(const ActualSession&) const = default;
};

struct ActualJob {
  int64_t id = 0;
  ActualState state = ActualState::kRunning;
  int pid = 0;
  std::optional<int> exitCode{};
  std::optional<int> signal{};
  TimeMs startedAt = 0;
  TimeMs finishedAt = 0;
  std::string message{};  // why it failed to start, or was lost
  std::optional<ActualSession> session{};
  int masterPort = 0;  // the rendezvous port it chose (DesiredJob::chooseMasterPort); 0 = none
  // A job in an image: the manifest digest the image resolved to, once pulled ("sha256:<hex>").
  std::string imageDigest{};
  // While kPulling: bytes of the image fetched so far and in all (0 = not known yet).
  int64_t pullBytes = 0;
  int64_t pullTotal = 0;
  // The lowest CUDA the image declares it needs (its NVIDIA_REQUIRE_CUDA's "cuda>=X.Y"), once
  // pulled; "" = none.
  std::string imageMinCuda{};
};

struct LogChunk {
  int64_t job = 0;
  int64_t offset = 0;
  std::string data;
};

// One GPU's readings in one sample round. A field the driver could not give is absent (nullopt),
// not zero: an idle GPU and an unknown one must not look alike.
struct GpuSample {
  int index = 0;
  std::optional<double> utilizationPct;  // 0..100
  std::optional<int64_t> memoryUsedMib;
  std::optional<double> temperatureC;
  std::optional<double> powerW;
  std::optional<int64_t> smClockMhz;
  std::optional<int64_t> eccCorrected;  // aggregate (lifetime) counts, as NVML keeps them
  std::optional<int64_t> eccUncorrected;
  std::vector<int> pids;  // processes on the GPU (NVML compute processes)
};

// A sample round: every GPU of the host at one moment, and how often the agent samples, so that
// allotd can tell a stale sample from a fresh one.
struct Telemetry {
  std::string host;  // the sending host, as its credential names it; allotd checks it
  TimeMs at = 0;
  int64_t intervalMs = 0;
  std::vector<GpuSample> gpus;
};

// What a reprovisioning hook did on the host. `output` is its stdout and stderr together,
// the last 256 KiB when it said more.
struct HookResult {
  int64_t id = 0;
  bool ok = false;
  int exitCode = -1;  // -1 when killed by a signal or never started
  bool timedOut = false;
  std::string output;
};

// What a health check found. `problems` empty means healthy; each is one line for people
// ("GPU 3 missing: expected 8 GPUs, found 7", "driver 535.54 is older than 550.0").
struct HealthReport {
  std::vector<std::string> problems;
  int gpuCount = 0;
  std::vector<std::string> gpuModels;
  std::string driverVersion;
  std::string cudaVersion;
  int64_t freeDiskMib = -1;  // -1: unknown
  std::string burnIn;        // "passed", "failed: ...", "skipped: simulated GPUs", ...
};

// What a host task did. ok only when every step it asked for succeeded; otherwise failedStep is
// "wipe", "hook" or "health" and reason one line saying why. `output` is every step's output in
// order (the wipe's account, the hook's stdout and stderr, the health report), the last 256 KiB.
struct HostTaskResult {
  int64_t id = 0;
  bool ok = false;
  std::string failedStep;
  std::string reason;
  std::string output;
  std::optional<HookResult> hook;      // when the task had a hook that started
  std::optional<HealthReport> health;  // when the task had a health check that ran
};

// A piece of a running task's output, for live viewing (`allot host log --follow`).
struct TaskOutput {
  int64_t id = 0;
  int64_t offset = 0;  // bytes of this task's output before `data`
  std::string data;
};

// The agent's inventory is the truth about its host's hardware: copies it onto the Host, keeping
// the admin's settings (dedication, sharing) of each GPU it already knew.
void applyInventory(Host& host, const Inventory& inv);

nlohmann::json toJson(const Inventory& inv);
// Parses and validates (validateInventory).
Result<Inventory> inventoryFromJson(const nlohmann::json& j);
// Counts, indexes, CPUs, memory and text lengths within the kMax* bounds above; GPU indexes and
// UUIDs unique. The error names the first bad field.
Status validateInventory(const Inventory& inv);
// An address other hosts can dial: an IPv4 or IPv6 literal, or a DNS name (RFC 1123 labels).
// It ends up in a workload's MASTER_ADDR, so nothing else (spaces, shell or URL syntax) passes.
bool isHostAddress(const std::string& s);
nlohmann::json toJson(const RunAs& r);
Result<RunAs> runAsFromJson(const nlohmann::json& j);
nlohmann::json toJson(const DesiredJob& d);
Result<DesiredJob> desiredJobFromJson(const nlohmann::json& j);
nlohmann::json toJson(const ActualJob& a);
nlohmann::json toJson(const ActualSession& s);
Result<ActualSession> actualSessionFromJson(const nlohmann::json& j);
Result<ActualJob> actualJobFromJson(const nlohmann::json& j);

nlohmann::json toJson(const GpuSample& s);
Result<GpuSample> gpuSampleFromJson(const nlohmann::json& j);
nlohmann::json toJson(const Telemetry& t);  // with "type":"telemetry"
Result<Telemetry> telemetryFromJson(const nlohmann::json& j);

// `refusedDesired`: desired states refused since the agent started (see above).
std::string encodeHello(const Inventory& inv, const std::vector<ActualJob>& jobs,
                        int64_t refusedDesired = 0);
std::string encodeStatus(const std::vector<ActualJob>& jobs, int64_t refusedDesired = 0);
// The count an agent's hello or status reports; 0 when absent (an older agent) or not a count.
int64_t refusedDesiredOf(const nlohmann::json& msg);
// `images`: what the host's image cache is asked to do (model/image_cache.h); left out when
// nothing is.
// How much of a job's output allotd keeps (allotd --max-log-bytes): the first `head` bytes and the
// last `tail`; tail 0 = all of it. Past the head, the agent ships only what could still be in the
// last `tail` bytes, skipping ahead over the rest: a job whose output outruns the link (or a
// sparse file of a petabyte, made by ftruncate on its stdout) costs the link `tail` bytes.
struct LogKeep {
  int64_t head = 0;
  int64_t tail = 0;
  bool operator==(const LogKeep&) const = default;
};
std::string encodeDesired(const std::vector<DesiredJob>& jobs, int64_t heartbeatMs,
                          const std::optional<HostTask>& task = std::nullopt,
                          const ImageCommands& images = {}, const LogKeep& logKeep = {});

// A desired-state message, decoded whole or not at all: one job entry that does not decode (a
// version skew, a bug) refuses the message, naming the entry, so that the agent keeps the last
// good one. A job merely left out would be stopped as "not wanted any more". Fields it does not
// know are ignored.
struct DesiredState {
  std::vector<DesiredJob> jobs;
  std::optional<int64_t> heartbeatMs;
  std::optional<HostTask> task;
  ImageCommands images;
  LogKeep logKeep;  // {0, 0} from an allotd that keeps all output, or says nothing of it
};
Result<DesiredState> decodeDesired(const nlohmann::json& msg);
nlohmann::json toJson(const UnixAccount& a);
nlohmann::json toJson(const HookSpec& h);
Result<HookSpec> hookSpecFromJson(const nlohmann::json& j);
nlohmann::json toJson(const HostTask& t);
Result<HostTask> hostTaskFromJson(const nlohmann::json& j);
nlohmann::json toJson(const HookResult& r);
Result<HookResult> hookResultFromJson(const nlohmann::json& j);
nlohmann::json toJson(const HealthReport& r);
Result<HealthReport> healthReportFromJson(const nlohmann::json& j);
std::string encodeTaskResult(const HostTaskResult& r);
Result<HostTaskResult> taskResultFromJson(const nlohmann::json& j);
std::string encodeTaskOutput(const TaskOutput& o);
Result<TaskOutput> taskOutputFromJson(const nlohmann::json& j);
std::string encodeLogChunk(const LogChunk& chunk);
Result<LogChunk> decodeLogChunk(const std::string& frame);

}  // namespace allot::model
