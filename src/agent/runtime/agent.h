#pragma once
// Agent: the host side of Allot. Holds one WebSocket to allotd, converges the host's workloads to
// the desired state allotd sends, ships their output, and reports their actual state (which is
// also its heartbeat). Level-triggered: after either side restarts, the next hello/desired
// exchange repairs the world; jobs that ran on while the agent was away are re-adopted by the
// executor from its work directory.
//
// Writes to the WebSocket go through one writer per connection (AgentOutbox): the tick loop queues
// status, telemetry and output, the tunnel endpoint queues its frames.
//
// Threading: everything runs on the io_context passed to run(), one thread, but for the host task,
// which runs on a thread of its own and reaches the GPUs only through gpus_ (a LockedGpuProvider:
// the provider is not thread-safe and the loop samples it for telemetry meanwhile) and the XID
// history through xidMutex_. Allotd sends a task only to a drained host, so no job starts while it
// runs; the wipe refuses if the executor still runs one.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "agent/exec/executor.h"
#include "agent/gpu/gpu_provider.h"
#include "agent/gpu/locked_gpu_provider.h"
#include "agent/image/image_puller.h"
#include "agent/runtime/http_join.h"
#include "agent/runtime/open_logs.h"
#include "agent/runtime/tunnel_endpoint.h"
#include "agent/session/fork_server.h"
#include "agent/session/session_launcher.h"
#include "agent/session/session_ssh.h"
#include "common/clock.h"
#include "model/agent_protocol.h"

namespace allot::agent {

struct AgentConfig {
  std::string serverUrl{};  // http://host:port or https://host:port
  std::string joinToken{};  // needed only until the host holds its own credential
  std::string name{};       // host name; default: the machine's hostname
  std::string workDir{};
  std::string cgroupMode{};  // what the executor's confinement is, for the inventory
  // How often GPUs are sampled; each round is one telemetry message to allotd.
  int64_t telemetryIntervalMs = 5000;
  std::string scratchDir{};  // per-job scratch root the wipe empties; default <workDir>/scratch
  std::string homeDir{};     // team home data the wipe empties when asked; "" = none on this host
  std::string caFile{};      // PEM CA for an https:// server; "" = the system's trusted CAs
  bool runAsOwner = false;   // --run-as-owner: workloads start as their owner (reported to allotd)
  // allot-jupyter-forkserver, kept running so that Jupyter sessions start fast; "" = none.
  std::string forkServer{};
  // sshd for SSH into sessions (one `sshd -i` per connection), and ssh-keygen for their host
  // keys; "" = sessions get no SSH here.
  std::string sshd{};
  std::string sshKeygen = "/usr/bin/ssh-keygen";
  // allot-ssh-bridge, which logs SSH logins into sessions in images; "" = those get no SSH.
  std::string sshBridge{};
  // Sessions' `local` storage: user U's persistent home is DIR/U; "" = <workDir>/homes.
  std::string sessionHomeDir{};
  std::string teamDir{};  // --team-dir: team directories the wipe empties when asked; "" = none
  // Direct SSH ports (--ssh-direct-ports LO-HI, 0 = none) and where they listen and are
  // advertised (--ssh-direct-address; "" = every address, advertised as the machine's hostname).
  int sshDirectPortLo = 0, sshDirectPortHi = 0;
  std::string sshDirectAddress{};
  // --advertise-address: where other hosts reach this one (a gang's MASTER_ADDR when its rank 0
  // runs here); "" = the local address this host's connection to allotd leaves from.
  std::string advertiseAddress{};
  // --state-dir: where the executor keeps job records (job_dir.h); "" = the work dir.
  std::string stateDir{};
};

// The least --telemetry-interval: NVML's own utilisation is averaged over about a second.
inline constexpr int64_t kMinTelemetryIntervalMs = 1000;

// The host's own credential, kept in the work directory after joining.
struct Credential {
  std::string host;
  std::string token;
};

class Agent {
 public:
  Agent(AgentConfig config, GpuProvider& gpus, Executor& executor, const Clock& clock);

  // Joins with the join token unless a credential is already saved. Blocking; before run().
  Status ensureJoined();
  // Runs the connection loop until the io_context stops.
  void run(boost::asio::io_context& io);
  const std::string& hostName() const { return credential_.host; }
  // What allotd's tunnel streams (session, target) connect to on this host; by default none
  // (refuseAllTunnels). Before run().
  void setTunnelResolver(TunnelResolver resolver) { tunnelResolver_ = std::move(resolver); }
  // Jobs in images (docs/environments.md): pulled into the store behind `puller` and started
  // under crun. Without one (nullptr), such a job fails to start with `whyNot`. Before run().
  void setImages(ImageStore* store, ImagePuller* puller, std::string whyNot) {
    imageStore_ = store;
    images_ = puller;
    imagesWhyNot_ = std::move(whyNot);
  }

  model::Inventory inventory();

 private:
  boost::asio::awaitable<void> connectionLoop();
  // One connection: connects (and, for https, handshakes TLS), then runs `converse`.
  boost::asio::awaitable<Status> session();
  // Everything after the connection is up, for ws:// and wss:// alike (agent.cc instantiates
  // it for both): hello, desired states in, output, status and telemetry out.
  template <typename Ws>
  boost::asio::awaitable<Status> converse(std::shared_ptr<Ws> ws, ServerAddress addr);
  void reconcile(const std::vector<model::DesiredJob>& desired);
  // What a tunnel stream allotd opens to (session, target) reaches: a session this host runs,
  // never anything else (docs/sessions.md).
  Result<TunnelTarget> resolveTunnel(int64_t session, const std::string& target);
  // Whom session `d`'s processes run as on this host.
  SessionIdentity sessionIdentity(const model::DesiredJob& d) const;
  std::vector<model::ActualJob> actualJobs();
  // One sample round, encoded; empty when the provider could not be read (logged).
  std::string telemetryMessage();
  // The file a job on a simulated host writes its GPU utilisation to (ALLOT_SIM_GPU_UTIL_FILE).
  std::string simUtilFile(int64_t jobId) const;
  // Job `d`'s image, for its JobSpec: true when `spec.image` is set and the job may start now;
  // false while it is pulled (reported from pulling_) or when it cannot start (reported once,
  // from cancelledBeforeStart_).
  bool imageReady(const model::DesiredJob& d, JobSpec& spec, TimeMs now);
  // Reports it once, like a job cancelled before it started, until allotd drops it.
  void failBeforeStart(int64_t id, const std::string& message, TimeMs now);
  // allotd's commands to the image cache (imageCommands_): prunes go to the puller; each
  // prepull is pulled like a job's image, under an id of its own (negative, never a job's).
  void applyImageCommands();
  // The image cache's report (model/image_cache.h), encoded; "" on a host without images.
  std::string imageReport();
  // Host tasks (wipe, hook, health check): starts the task allotd's desired state names, once per
  // id, on a thread of its own (it blocks for minutes); collects its result when done.
  void startTaskIfWanted();
  void collectTask();
  // The task_result to send now, or "" (the result of the wanted task, once a heartbeat).
  std::string taskResultToSend(TimeMs now, int64_t heartbeatMs);
  // The running task's output file (<workDir>/hooks/<id>/output.log).
  std::string taskOutputPath(int64_t id) const;
  // Reads the driver's new XID events into xidHistory_.
  void drainXids();

  AgentConfig config_;
  LockedGpuProvider gpus_;
  Executor& executor_;
  const Clock& clock_;
  Credential credential_;
  std::shared_ptr<boost::asio::ssl::context> tls_;  // for an https:// server; made once
  std::vector<model::Gpu> gpuList_;
  TunnelResolver tunnelResolver_ = refuseAllTunnels;

  // Per connection: how many bytes of each job's output allotd holds (from desired state).
  std::map<int64_t, int64_t> logShipped_;
  // Where this host's run of a job begins in allotd's log: a requeued job's new run writes a
  // fresh local log whose byte 0 is allotd's byte logBase_ (what it held when the run started),
  // so the run's output is appended, not lost under the old run's length. In memory: an agent
  // restarted during a requeued run reads its local log from allotd's offset (docs/agent.md).
  std::map<int64_t, int64_t> logBase_;
  OpenLogs openLogs_;  // the logs shipped from, held open while their jobs are known
  // What allotd keeps of each job's output (its desired state says): past the head, output that
  // is more than `tail` bytes behind a log's end is skipped, not shipped.
  model::LogKeep logKeep_;
  // Rendezvous ports this agent chose for gangs whose rank 0 it runs (DesiredJob::
  // chooseMasterPort), reported with the job until allotd forgets it.
  std::map<int64_t, int> masterPorts_;
  // The local address of the last connection to allotd (Inventory::address by default).
  std::string connectedFrom_;
  bool haveDesired_ = false;
  bool logOffsetsKnown_ = false;
  std::vector<model::DesiredJob> lastDesired_;
  int64_t refusedDesired_ = 0;   // desired states that did not decode, refused whole
  bool waitingForGpus_ = false;  // a job waits for a stopping process to release its GPUs
  std::set<int64_t> stopping_;
  // Jobs that ended before they started here (cancelled, or a session that could not be
  // prepared): reported once, until allotd drops them.
  std::map<int64_t, model::ActualJob> cancelledBeforeStart_;
  bool statusDirty_ = true;

  // Jobs in images: the host's store and its puller (none: imagesWhyNot_ says why), the jobs
  // waiting for their image, and the digest each started job's image resolved to.
  ImageStore* imageStore_ = nullptr;
  ImagePuller* images_ = nullptr;
  std::string imagesWhyNot_ = "this agent was started without an image store";
  std::set<int64_t> pulling_;
  uint64_t pullsSeen_ = 0;  // images_->generation() when the waiting jobs were last looked at
  std::map<int64_t, std::string> imageDigests_;
  std::map<int64_t, std::string> imageMinCudas_;  // what started jobs' images declared
  model::ImageCommands imageCommands_;
  std::map<std::string, int64_t> prepulls_;            // ref -> its id with the puller
  std::set<std::string> prepullsDone_;                 // cached, until allotd drops them
  std::map<std::string, std::string> prepullsFailed_;  // ref -> why, until allotd drops it
  int64_t nextPrepullId_ = -1;

  // Critical XIDs seen since the agent started, newest last, at most kMaxXidHistory; read by the
  // health check on the task thread. Declared before taskRun_, whose destructor waits for the
  // task, so that they outlive it.
  static constexpr size_t kMaxXidHistory = 256;
  std::mutex xidMutex_;
  std::deque<XidEvent> xidHistory_;  // guarded by xidMutex_

  std::optional<model::HostTask> wantedTask_;   // from the newest desired state
  std::future<model::HostTaskResult> taskRun_;  // the task running now, if valid()
  int64_t taskRunningId_ = 0;
  // Finished runs, by id: a run is never repeated by this process, and its result is sent until
  // allotd's desired state stops naming it (it may have been lost with a connection).
  std::map<int64_t, model::HostTaskResult> taskResults_;
  TimeMs taskResultSentAt_ = 0;  // 0: not sent on this connection yet
  // Bytes of the running task's output sent on this connection (0 again on reconnect: allotd
  // ignores what it already has).
  int64_t taskOutputSent_ = 0;
  int64_t taskOutputId_ = 0;

  // Interactive sessions (docs/sessions.md): their commands and reports, and the fork server.
  SessionLauncher sessions_;
  SessionSsh ssh_;
  std::unique_ptr<ForkServerProcess> forkServer_;
};

}  // namespace allot::agent
