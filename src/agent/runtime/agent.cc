#include "agent/runtime/agent.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "agent/exec/hook_runner.h"
#include "agent/exec/run_as.h"
#include "agent/host_ops/host_task_runner.h"
#include "agent/runtime/agent_outbox.h"
#include "agent/runtime/exit_watch.h"
#include "agent/runtime/http_join.h"
#include "agent/runtime/tunnel_endpoint.h"
#include "common/bounded_json.h"
#include "common/build_info.h"
#include "common/tls.h"
#include "common/version.h"
#include "model/tunnel_frame.h"
#include "protocol/agent_messages.h"

namespace allot::agent {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using asio::use_awaitable;

namespace {

constexpr auto kTick = std::chrono::milliseconds(50);
constexpr int64_t kMaxLogChunk = 256 * 1024;
// A job's output shipped in one pass of the loop, at most. A job that writes faster than the link
// drains (`yes`) must not keep the loop shipping its log: no status, telemetry or other job's
// output would go out meanwhile, and allotd would find the host unreachable and lose every
// tenant's jobs on it. The rest goes in the next passes, which then come without waiting a tick.
constexpr int kMaxLogChunksPerPass = 4;

// An ended job as it stood while it ran: what allotd hears of it until its output is shipped.
model::ActualJob stillRunning(model::ActualJob a) {
  a.state = model::ActualState::kRunning;
  a.exitCode.reset();
  a.signal.reset();
  a.finishedAt = 0;
  a.message.clear();
  return a;
}

std::string credentialPath(const std::string& workDir) { return workDir + "/credential.json"; }

Result<Credential> loadCredential(const std::string& workDir) {
  std::ifstream in(credentialPath(workDir));
  if (!in) return Status::NotFound("no saved credential");
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("host") || !j.contains("token"))
    return Status::InvalidArgument("credential file " + credentialPath(workDir) + " is corrupt");
  return Credential{j["host"].get<std::string>(), j["token"].get<std::string>()};
}

Status saveCredential(const std::string& workDir, const Credential& c) {
  std::string path = credentialPath(workDir);
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Unavailable("cannot write " + tmp + ": " + std::strerror(errno));
  std::string body = nlohmann::json{{"host", c.host}, {"token", c.token}}.dump();
  bool ok = ::write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size());
  ok = ::fsync(fd) == 0 && ok;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::Unavailable("cannot write " + path);
  return Status::Ok();
}

// A TCP port nobody listens on here now, as the kernel hands out for port 0: what torchrun
// itself does for a rendezvous port. The job binds it moments later; a port taken in between
// fails the job's rendezvous loudly (the address is in use), not silently.
Result<int> freeTcpPort() {
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool v6 = fd >= 0;
  if (!v6) fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(std::string("socket: ") + std::strerror(errno));
  sockaddr_storage ss{};
  socklen_t len;
  if (v6) {
    // Free on IPv4's any address too, whatever net.ipv6.bindv6only says.
    const int off = 0;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    len = sizeof *a;
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::Internal(std::string("bind: ") + std::strerror(err));
  }
  ::close(fd);
  return static_cast<int>(ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                   : reinterpret_cast<sockaddr_in*>(&ss)->sin_port));
}

std::string machineHostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  std::string h = buf;
  for (auto& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (auto dot = h.find('.'); dot != std::string::npos) h.resize(dot);
  return h.empty() ? "localhost" : h;
}

// Reads [offset, offset+max) of a file; empty when nothing new.
std::string readFrom(const std::string& path, int64_t offset, int64_t max) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out = readAt(fd, offset, max);
  ::close(fd);
  return out;
}

}  // namespace

Agent::Agent(AgentConfig config, GpuProvider& gpus, Executor& executor, const Clock& clock)
    : config_(std::move(config)),
      gpus_(gpus),
      executor_(executor),
      clock_(clock),
      sessions_(SessionLauncherConfig{
          config_.workDir + "/sessions", config_.forkServer,
          config_.workDir + "/forkserver/jupyter.sock",
          config_.sessionHomeDir.empty() ? config_.workDir + "/homes" : config_.sessionHomeDir,
          config_.scratchDir.empty() ? config_.workDir + "/scratch" : config_.scratchDir}),
      ssh_(SessionSshConfig{config_.sshd, config_.sshKeygen, config_.workDir + "/session-ssh",
                            config_.sshDirectPortLo, config_.sshDirectPortHi,
                            config_.sshDirectAddress, machineHostname(), config_.sshBridge}) {
  if (config_.name.empty()) config_.name = machineHostname();
  if (config_.scratchDir.empty()) config_.scratchDir = config_.workDir + "/scratch";
  if (!config_.forkServer.empty())
    forkServer_ = std::make_unique<ForkServerProcess>(
        config_.forkServer, config_.workDir + "/forkserver/jupyter.sock",
        (config_.stateDir.empty() ? config_.workDir : config_.stateDir) + "/jobs", clock_);
  tunnelResolver_ = [this](int64_t session, const std::string& target) {
    return resolveTunnel(session, target);
  };
}

Result<TunnelTarget> Agent::resolveTunnel(int64_t session, const std::string& target) {
  const model::DesiredJob* wanted = nullptr;
  for (const auto& d : lastDesired_) {
    if (d.id == session && d.session && !d.cancel) wanted = &d;
  }
  if (wanted == nullptr || !executor_.knows(session))
    return Status::NotFound("no session " + std::to_string(session) + " runs on this host");
  if (target == "jupyter") {
    if (wanted->session->app.rfind("jupyter-", 0) != 0)
      return Status::FailedPrecondition("session " + std::to_string(session) + " runs no Jupyter");
    // The socket is in the owner's working directory, which only they (and root) may enter; the
    // directory itself is in the agent's job directory, so its owner is the session's.
    const std::string work = executor_.workPath(session);
    struct stat st {};
    if (::lstat(work.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return Status::Unavailable("session " + std::to_string(session) +
                                 " has no working directory");
    TunnelTarget t = TunnelTarget::unixSocket(SessionLauncher::socketPath(work));
    t.peerUid = st.st_uid;
    return t;
  }
  if (target == "ssh") {
    return ssh_.connect(session, sessionIdentity(*wanted), wanted->session->sshKeys,
                        executor_.cgroupsOf(session), processEnvironment(executor_.pidOf(session)),
                        executor_.containerOf(session));
  }
  return Status::InvalidArgument("unknown tunnel target '" + target + "'");
}

SessionIdentity Agent::sessionIdentity(const model::DesiredJob& d) const {
  SessionIdentity who;
  // An identity the executor would refuse (none, root's, ids past 32 bits, which the casts below
  // would cut, 2^32 to root's) is "nobody" to the tunnels; such a session is never started
  // (reconcile checks it before preparing the session).
  if (config_.runAsOwner && !checkRunAs(d.runAs, d.id).ok()) {
    who.uid = who.gid = 65534;
    who.switchUser = true;
    return who;
  }
  if (config_.runAsOwner) {
    who.uid = static_cast<uid_t>(d.runAs->uid);
    who.gid = static_cast<gid_t>(d.runAs->gid);
    if (d.runAs->teamGid > 0) who.groups.push_back(static_cast<gid_t>(d.runAs->teamGid));
    who.switchUser = true;
  } else {
    who.uid = ::geteuid();
    who.gid = ::getegid();
  }
  return who;
}

void Agent::drainXids() {
  auto events = gpus_.drainXidEvents();
  if (events.empty()) return;
  std::lock_guard lock(xidMutex_);
  for (const auto& e : events) {
    spdlog::error("GPU {}: critical XID {}", e.gpuIndex, e.xid);
    xidHistory_.push_back(e);
    if (xidHistory_.size() > kMaxXidHistory) xidHistory_.pop_front();
  }
}

std::string Agent::taskOutputPath(int64_t id) const {
  return config_.workDir + "/hooks/" + std::to_string(id) + "/output.log";
}

model::Inventory Agent::inventory() {
  model::Inventory inv;
  inv.hostname = machineHostname();
  inv.cpus = static_cast<int>(std::thread::hardware_concurrency());
  inv.memoryMib =
      static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE) / (1024 * 1024);
  auto gpus = gpus_.discover();
  if (gpus.ok()) {
    gpuList_ = *gpus;
  } else {
    spdlog::error("GPU discovery failed: {}", gpus.status().message());
  }
  inv.gpus = gpuList_;
  inv.gpuProvider = gpus_.name();
  inv.simulated = gpus_.simulated();
  inv.agentVersion = allotVersion();
  inv.cgroup = config_.cgroupMode.empty() ? "none" : config_.cgroupMode;
  inv.runAsOwner = config_.runAsOwner ? "required" : "off";
  inv.address = config_.advertiseAddress.empty() ? connectedFrom_ : config_.advertiseAddress;
  if (!model::isHostAddress(inv.address)) inv.address.clear();  // say a scoped IPv6: the name
  inv.images = images_ != nullptr;
  return inv;
}

Status Agent::ensureJoined() {
  auto addr = parseServerUrl(config_.serverUrl);
  if (!addr.ok()) return addr.status();
  if (addr->tls) {
    auto ctx = tls::clientContext(config_.caFile);
    if (!ctx.ok()) return ctx.status().withContext("--ca-file");
    tls_ = *ctx;
  }
  auto saved = loadCredential(config_.workDir);
  if (saved.ok()) {
    credential_ = *saved;
    return Status::Ok();
  }
  if (saved.status().code() != Code::kNotFound) return saved.status();
  if (config_.joinToken.empty())
    return Status::InvalidArgument(
        "this host has not joined yet: pass --join-token (make one with `allot host join-token`)");
  auto joined = joinCluster(*addr, config_.caFile, config_.joinToken, config_.name, inventory());
  if (!joined.ok()) return joined.status();
  credential_ = Credential{joined->host, joined->credential};
  ALLOT_RETURN_IF_ERROR(saveCredential(config_.workDir, credential_));
  spdlog::info("joined the cluster as host '{}'", credential_.host);
  return Status::Ok();
}

void Agent::run(asio::io_context& io) { asio::co_spawn(io, connectionLoop(), asio::detached); }

std::vector<model::ActualJob> Agent::actualJobs() {
  auto jobs = executor_.poll();
  for (const auto& [id, a] : cancelledBeforeStart_) jobs.push_back(a);
  for (int64_t id : pulling_) {
    auto st = images_ ? images_->stateOf(id) : std::nullopt;
    if (!st || st->kind != ImagePuller::State::Kind::kPulling) continue;  // seen next reconcile
    model::ActualJob a;
    a.id = id;
    a.state = model::ActualState::kPulling;
    a.message = st->message;
    a.pullBytes = st->bytes;
    a.pullTotal = st->total;
    jobs.push_back(std::move(a));
  }
  for (auto& a : jobs) {
    if (auto port = masterPorts_.find(a.id); port != masterPorts_.end())
      a.masterPort = port->second;
    if (auto digest = imageDigests_.find(a.id); digest != imageDigests_.end())
      a.imageDigest = digest->second;
    if (auto need = imageMinCudas_.find(a.id); need != imageMinCudas_.end())
      a.imageMinCuda = need->second;
    if (a.state != model::ActualState::kRunning) continue;
    for (const auto& d : lastDesired_) {
      if (d.id == a.id && d.session) {
        ssh_.keepDirect(a.id, a.pid, sessionIdentity(d), d.session->sshKeys,
                        executor_.cgroupsOf(a.id), executor_.containerOf(a.id));
        a.session = sessions_.report(d, executor_.workPath(a.id));
        ssh_.report(a.id, *a.session);
      }
    }
  }
  return jobs;
}

void Agent::reconcile(const std::vector<model::DesiredJob>& desired) {
  lastDesired_ = desired;
  waitingForGpus_ = false;
  std::set<int64_t> wanted;
  for (const auto& d : desired) wanted.insert(d.id);
  // GPUs still held by processes allotd no longer wants here (a job declared lost while this
  // host was away runs until it is stopped): nothing new starts on them until those end.
  std::set<int> held;
  for (const auto& a : executor_.poll()) {
    if (a.state != model::ActualState::kRunning || wanted.count(a.id)) continue;
    for (int g : executor_.gpusOf(a.id)) held.insert(g);
  }
  auto now = clock_.nowMs();
  std::vector<JobSpec> toStart;
  for (const auto& d : desired) {
    logShipped_.try_emplace(d.id, d.logOffset);
    if (!executor_.knows(d.id)) {
      if (cancelledBeforeStart_.count(d.id)) continue;
      // Its command comes in a later message, once the jobs before it have started.
      if (d.deferred && !d.cancel) continue;
      bool gpuBusy = std::any_of(d.gpuIndices.begin(), d.gpuIndices.end(),
                                 [&](int g) { return held.count(g) > 0; });
      if (gpuBusy && !d.cancel) {
        waitingForGpus_ = true;  // retried every tick until the old process is gone
        continue;
      }
      if (d.cancel) {
        if (images_) images_->release(d.id);
        pulling_.erase(d.id);
        model::ActualJob a;
        a.id = d.id;
        a.state = model::ActualState::kExited;
        a.finishedAt = now;
        a.message = "cancelled before it started";
        cancelledBeforeStart_[d.id] = a;
        continue;
      }
      JobSpec spec;
      // Its image first: a pull may take minutes, and nothing else (a rendezvous port, a
      // session's directories) should be taken for it meanwhile.
      if (!d.image.empty() && !imageReady(d, spec, now)) continue;
      spec.id = d.id;
      spec.command = d.command;
      spec.env = d.env;
      if (gpus_.simulated() && !d.gpuIndices.empty()) {
        spec.env["ALLOT_SIM_GPU_UTIL_FILE"] = simUtilFile(d.id);
      }
      spec.gpuUuids = d.gpuUuids;
      spec.gpuIndices = d.gpuIndices;
      spec.gpuMinors = d.gpuMinors;
      spec.realGpus = !gpus_.simulated();
      spec.cpuMillis = d.cpuMillis;
      spec.memoryLimitMib = d.memoryMib;
      spec.runAs = d.runAs;
      spec.workdir = d.workdir;
      spec.session = d.session.has_value();
      if (d.chooseMasterPort) {
        auto port = freeTcpPort();
        if (!port.ok()) {
          failBeforeStart(
              d.id, "cannot find a free port for the rendezvous: " + port.status().message(), now);
          continue;
        }
        masterPorts_[d.id] = *port;
        spec.env["MASTER_PORT"] = spec.env["PET_MASTER_PORT"] = std::to_string(*port);
      }
      if (d.session) {
        // The identity first, as the executor checks it: the session's directories and SSH are
        // made for it below, before the executor sees the job.
        if (Status st = config_.runAsOwner ? checkRunAs(spec) : Status::Ok(); !st.ok()) {
          failBeforeStart(d.id, st.message(), now);
          continue;
        }
        // Under runAsOwner the identity checked above is never root's.
        const bool asRoot = !config_.runAsOwner && ::geteuid() == 0;
        const SessionIdentity who = sessionIdentity(d);
        if (Status st =
                sessions_.prepare(d, executor_.workPath(d.id), asRoot, who.uid, who.gid, spec);
            !st.ok()) {
          failBeforeStart(d.id, "cannot prepare the session: " + st.message(), now);
          continue;
        }
        if (Status st = ssh_.prepare(d.id, who); !st.ok())
          spdlog::warn("session {}: no SSH: {}", d.id, st.message());
        // The command, not the environment: the environment holds the session's token.
        std::string argv;
        for (const auto& arg : spec.command) argv += (argv.empty() ? "" : " ") + arg;
        spdlog::info("session {}: {} as {}", d.id, d.session->app, argv);
      }
      toStart.push_back(std::move(spec));
      logBase_[d.id] = d.logOffset;
      logShipped_[d.id] = std::max(logShipped_[d.id], d.logOffset);
      openLogs_.forget(d.id);  // a run before this one (a requeue) had a log of its own
    } else if (d.cancel && !stopping_.count(d.id)) {
      stopping_.insert(d.id);
      executor_.stop(d.id, d.graceMs);
      spdlog::info("job {}: stopping (cancelled), grace {} ms", d.id, d.graceMs);
    }
  }
  // Side by side: a pass that placed eight jobs here starts them in about the time of one.
  for (const auto& a : executor_.startAll(toStart)) {
    spdlog::info("job {}: {}{}", a.id, model::actualStateName(a.state),
                 a.message.empty() ? "" : ": " + a.message);
  }
  // What allotd no longer wants: finished jobs are forgotten, running ones stopped.
  for (const auto& a : executor_.poll()) {
    if (wanted.count(a.id)) continue;
    if (a.state == model::ActualState::kRunning) {
      if (!stopping_.count(a.id)) {
        stopping_.insert(a.id);
        executor_.stop(a.id, 10'000);
        spdlog::warn("job {}: not wanted by allotd any more; stopping", a.id);
      }
    } else {
      executor_.forget(a.id);
      sessions_.forget(a.id);
      ssh_.forget(a.id);
      stopping_.erase(a.id);
      logShipped_.erase(a.id);
      logBase_.erase(a.id);
      openLogs_.forget(a.id);
      masterPorts_.erase(a.id);
      imageDigests_.erase(a.id);
      imageMinCudas_.erase(a.id);
    }
  }
  // Pulls for jobs allotd no longer wants here.
  for (auto it = pulling_.begin(); it != pulling_.end();) {
    if (wanted.count(*it)) {
      ++it;
      continue;
    }
    if (images_) images_->release(*it);
    it = pulling_.erase(it);
  }
  for (auto it = cancelledBeforeStart_.begin(); it != cancelledBeforeStart_.end();) {
    it = wanted.count(it->first) ? std::next(it) : cancelledBeforeStart_.erase(it);
  }
  // After the starts: what runs now is what the image store must keep (its disk budget and
  // prunes spare it), and what it handed out before this is started by now.
  if (imageStore_) {
    auto inUse = executor_.imagesInUse();
    imageStore_->setInUse(std::move(inUse.refs), std::move(inUse.layers));
  }
  statusDirty_ = true;
}

void Agent::failBeforeStart(int64_t id, const std::string& message, TimeMs now) {
  model::ActualJob a;
  a.id = id;
  a.state = model::ActualState::kFailedToStart;
  a.finishedAt = now;
  a.message = message;
  cancelledBeforeStart_[id] = std::move(a);
}

bool Agent::imageReady(const model::DesiredJob& d, JobSpec& spec, TimeMs now) {
  auto ref = model::parseImageRef(d.image);
  if (!ref.ok()) {
    failBeforeStart(d.id, ref.status().message(), now);
    return false;
  }
  if (!images_) {
    failBeforeStart(d.id, "this host runs no jobs in images: " + imagesWhyNot_, now);
    return false;
  }
  std::optional<PullLogin> login;
  if (d.registryAuth)
    login = PullLogin{d.registryAuth->registry, d.registryAuth->username, d.registryAuth->password};
  auto st = images_->want(d.id, *ref, login ? &*login : nullptr);
  switch (st.kind) {
    case ImagePuller::State::Kind::kPulling:
      pulling_.insert(d.id);
      return false;
    case ImagePuller::State::Kind::kFailed:
      images_->release(d.id);
      pulling_.erase(d.id);
      // "image not found: REF", a refused digest, ...: the job never ran.
      failBeforeStart(d.id, st.failure.message(), now);
      return false;
    case ImagePuller::State::Kind::kReady:
      break;
  }
  images_->release(d.id);
  pulling_.erase(d.id);
  const StoredImage& image = *st.image;
  // NVIDIA_REQUIRE_CUDA, as the NVIDIA container toolkit reads it: only for work with GPUs. A
  // driver older than the image needs is not started here; allotd requeues the job with that
  // minimum (Cluster::requeueForImageCuda).
  if (const std::string need = model::cudaRequirementOf(image.config.env);
      !need.empty() && !d.gpuIndices.empty()) {
    const std::string have = gpuList_.empty() ? "" : gpuList_.front().cudaVersion;
    if (!versionAtLeast(have, need)) {
      failBeforeStart(d.id,
                      "its image " + image.ref + " needs CUDA " + need +
                          " (NVIDIA_REQUIRE_CUDA) and this host's driver has " +
                          (have.empty() ? "none" : have),
                      now);
      cancelledBeforeStart_[d.id].imageMinCuda = need;
      cancelledBeforeStart_[d.id].imageDigest = image.digest;
      return false;
    }
    imageMinCudas_[d.id] = need;
  }
  ContainerImage c;
  c.ref = image.ref;
  c.digest = image.digest;
  c.layersRoot = imageStore_->layersRoot();
  c.layers.assign(image.layers.rbegin(), image.layers.rend());  // topmost first
  c.entrypoint = image.config.entrypoint;
  c.cmd = image.config.cmd;
  c.env = image.config.env;
  c.workingDir = image.config.workingDir;
  spec.image = std::move(c);
  imageDigests_[d.id] = image.digest;
  return true;
}

void Agent::applyImageCommands() {
  if (!images_) return;
  images_->requestPrunes(imageCommands_.prunes);
  const std::set<std::string> asked(imageCommands_.prepulls.begin(), imageCommands_.prepulls.end());
  for (auto it = prepulls_.begin(); it != prepulls_.end();) {
    if (asked.count(it->first)) {
      ++it;
      continue;
    }
    images_->release(it->second);  // no longer asked: a pull of it stops
    it = prepulls_.erase(it);
  }
  std::erase_if(prepullsDone_, [&](const std::string& r) { return !asked.count(r); });
  std::erase_if(prepullsFailed_, [&](const auto& f) { return !asked.count(f.first); });
  for (const std::string& text : imageCommands_.prepulls) {
    if (prepullsDone_.count(text) || prepullsFailed_.count(text)) continue;
    ImagePuller::State st;
    auto it = prepulls_.find(text);
    if (it != prepulls_.end()) {
      auto now = images_->stateOf(it->second);
      if (!now) continue;
      st = std::move(*now);
    } else {
      auto ref = parseImageRef(text);
      if (!ref.ok()) {
        prepullsFailed_[text] = ref.status().message();
        continue;
      }
      it = prepulls_.emplace(text, nextPrepullId_--).first;
      // With the login of the team it is for (allotd sends it while the prepull is asked).
      std::optional<PullLogin> login;
      if (auto a = imageCommands_.prepullLogins.find(text); a != imageCommands_.prepullLogins.end())
        login = PullLogin{a->second.registry, a->second.username, a->second.password};
      st = images_->want(it->second, *ref, login ? &*login : nullptr);
    }
    if (st.kind == ImagePuller::State::Kind::kPulling) continue;
    images_->release(it->second);
    prepulls_.erase(it);
    if (st.kind == ImagePuller::State::Kind::kReady) {
      spdlog::info("image {}: prepulled", text);
      prepullsDone_.insert(text);
    } else {
      spdlog::warn("image {}: prepull failed: {}", text, st.failure.message());
      prepullsFailed_[text] = st.failure.message();
    }
  }
}

std::string Agent::imageReport() {
  if (!imageStore_ || !images_) return "";
  model::ImageReport r;
  const auto inUse = executor_.imagesInUse();
  auto stored = imageStore_->list();
  // The most recently used first, as many as a report holds.
  std::sort(stored.begin(), stored.end(),
            [](const StoredImage& a, const StoredImage& b) { return a.lastUsedMs > b.lastUsedMs; });
  if (stored.size() > model::kMaxReportedImages) stored.resize(model::kMaxReportedImages);
  for (const auto& i : stored)
    r.images.push_back({i.ref, i.digest, i.bytes, i.lastUsedMs, inUse.refs.count(i.ref) > 0,
                        model::cudaRequirementOf(i.config.env)});
  r.diskBytes = imageStore_->diskBytes();
  r.budgetBytes = imageStore_->budgetBytes();
  r.prunesDone = images_->prunesDone();
  for (const auto& [ref, id] : prepulls_) {
    model::PrepullState p;
    p.ref = ref;
    if (auto st = images_->stateOf(id)) {
      p.message = st->message;
      p.bytes = st->bytes;
      p.total = st->total;
    }
    r.prepulls.push_back(std::move(p));
  }
  for (const auto& [ref, why] : prepullsFailed_)
    r.prepulls.push_back({ref, true, why.substr(0, model::kMaxImageText), 0, 0});
  // Fetched, but gone again before this report (a budget smaller than the image): allotd must
  // not wait for it to show.
  std::set<std::string> cached;
  for (const auto& i : r.images) cached.insert(i.ref);
  for (const auto& ref : prepullsDone_)
    if (!cached.count(ref))
      r.prepulls.push_back(
          {ref, true, "fetched, but the cache's budget did not keep it (--image-budget)", 0, 0});
  if (r.prepulls.size() > model::kMaxPrepulls) r.prepulls.resize(model::kMaxPrepulls);
  return model::encodeImageReport(r);
}

std::string Agent::simUtilFile(int64_t jobId) const {
  std::string log = executor_.logPath(jobId);
  return log.substr(0, log.rfind('/') + 1) + "sim_gpu_util";
}

std::string Agent::telemetryMessage() {
  if (gpus_.simulated()) {
    // What the running jobs declare is all a simulated GPU has to report.
    std::vector<GpuProvider::Workload> workloads;
    std::set<int64_t> running;
    for (const auto& a : executor_.poll()) {
      if (a.state == model::ActualState::kRunning) running.insert(a.id);
    }
    for (const auto& d : lastDesired_) {
      if (!running.count(d.id)) continue;
      GpuProvider::Workload w;
      w.gpuIndices = d.gpuIndices;
      auto it = d.env.find("ALLOT_SIM_GPU_UTIL");
      if (it != d.env.end()) w.declaredUtilPct = std::atof(it->second.c_str());
      w.utilFile = simUtilFile(d.id);
      workloads.push_back(std::move(w));
    }
    gpus_.setWorkloads(std::move(workloads));
  }
  drainXids();
  auto samples = gpus_.sample();
  if (!samples.ok()) {
    spdlog::warn("GPU sampling failed: {}", samples.status().message());
    return {};
  }
  model::Telemetry t;
  t.host = credential_.host;
  t.at = clock_.nowMs();
  t.intervalMs = config_.telemetryIntervalMs;
  t.gpus = std::move(*samples);
  return model::toJson(t).dump();
}

asio::awaitable<void> Agent::connectionLoop() {
  auto backoff = std::chrono::milliseconds(100);
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    auto st = co_await session();
    if (st.ok()) {
      backoff = std::chrono::milliseconds(100);
      spdlog::warn("connection to allotd closed; reconnecting in {} ms", backoff.count());
    } else if (st.code() == Code::kUnauthenticated) {
      spdlog::error(
          "allotd refused this host's credential ({}); re-join with a new --join-token "
          "after removing {}",
          st.message(), credentialPath(config_.workDir));
    } else {
      spdlog::warn("connection to allotd ended: {}; retrying in {} ms", st.message(),
                   backoff.count());
    }
    timer.expires_after(backoff);
    co_await timer.async_wait(asio::as_tuple(use_awaitable));
    if (!st.ok()) backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
}

asio::awaitable<Status> Agent::session() {
  auto addr = parseServerUrl(config_.serverUrl);
  if (!addr.ok()) co_return addr.status();
  auto ex = co_await asio::this_coro::executor;
  asio::ip::tcp::resolver resolver(ex);
  auto [rec, endpoints] =
      co_await resolver.async_resolve(addr->host, addr->port, asio::as_tuple(use_awaitable));
  if (rec) co_return Status::Unavailable("cannot resolve " + addr->host + ": " + rec.message());
  auto connect = [&](auto& ws) -> asio::awaitable<Status> {
    auto& tcp = beast::get_lowest_layer(ws);
    tcp.expires_after(std::chrono::seconds(10));
    auto [cec, ep] = co_await tcp.async_connect(endpoints, asio::as_tuple(use_awaitable));
    if (cec)
      co_return Status::Unavailable("cannot connect to " + config_.serverUrl + ": " +
                                    cec.message());
    tcp.socket().set_option(asio::ip::tcp::no_delay(true));
    // The address this host reaches allotd from is, unless told otherwise, the one other hosts
    // reach it at: what a gang whose rank 0 runs here gets as MASTER_ADDR.
    boost::system::error_code lec;
    auto local = tcp.socket().local_endpoint(lec);
    if (!lec) connectedFrom_ = local.address().to_string();
    co_return Status::Ok();
  };
  if (!addr->tls) {
    auto ws = std::make_shared<websocket::stream<beast::tcp_stream>>(ex);
    if (Status st = co_await connect(*ws); !st.ok()) co_return st;
    co_return co_await converse(ws, *addr);
  }
  if (!tls_) co_return Status::FailedPrecondition("no TLS context for " + config_.serverUrl);
  auto ws = std::make_shared<websocket::stream<beast::ssl_stream<beast::tcp_stream>>>(ex, *tls_);
  if (Status st = co_await connect(*ws); !st.ok()) co_return st;
  if (Status st = tls::expectPeerName(ws->next_layer().native_handle(), addr->host); !st.ok())
    co_return st;
  auto [tec] = co_await ws->next_layer().async_handshake(asio::ssl::stream_base::client,
                                                         asio::as_tuple(use_awaitable));
  if (tec)
    co_return Status::Unavailable("TLS handshake with " + config_.serverUrl +
                                  " failed: " + tec.message());
  co_return co_await converse(ws, *addr);
}

template <typename Ws>
asio::awaitable<Status> Agent::converse(std::shared_ptr<Ws> ws, ServerAddress address) {
  auto ex = ws->get_executor();
  beast::get_lowest_layer(*ws).expires_never();
  ws->set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
  ws->read_message_max(64 << 20);
  std::string token = credential_.token;
  ws->set_option(websocket::stream_base::decorator([token](websocket::request_type& req) {
    req.set(beast::http::field::authorization, "Bearer " + token);
  }));
  websocket::response_type res;
  auto [hec] = co_await ws->async_handshake(res, address.host + ":" + address.port,
                                            "/api/v1/agent/stream", asio::as_tuple(use_awaitable));
  if (hec) {
    if (res.result() == beast::http::status::unauthorized)
      co_return Status::Unauthenticated(res.body());
    co_return Status::Unavailable("WebSocket handshake failed: " + hec.message());
  }
  spdlog::info("connected to allotd at {} as host '{}'", config_.serverUrl, credential_.host);

  // New connection: allotd tells us what it holds of each log with its first desired state.
  haveDesired_ = false;
  logOffsetsKnown_ = false;
  logShipped_.clear();
  taskResultSentAt_ = 0;
  taskOutputSent_ = 0;
  auto hello = protocol::encode(protocol::Hello{inventory(), actualJobs(), refusedDesired_});
  ws->text(true);
  auto [wec, wn] = co_await ws->async_write(asio::buffer(hello), asio::as_tuple(use_awaitable));
  if (wec) co_return Status::Unavailable("send failed: " + wec.message());

  // The reader applies desired states and hands tunnel frames to the endpoint; this coroutine
  // ticks: poll the executor, queue new output, then status when it changed or a heartbeat is
  // due. The outbox's writer is the only one writing to the socket, woken by whatever is queued.
  bool open = true;
  int64_t heartbeatMs = 5000;
  asio::steady_timer tick(ex);
  // Something to act on now (a desired state, a job's end): the loop skips its wait. A cancel
  // alone would be lost while the loop is busy between waits.
  bool wakeNow = false;
  auto wake = [&tick, &wakeNow] {
    wakeNow = true;
    tick.cancel();
  };
  // A job's end is told at once, not at the next tick (a one-millisecond job would otherwise
  // hold its GPUs for up to a tick more).
  ExitWatch exits(ex, wake);
  auto outbox = std::make_shared<AgentOutbox<Ws>>(ws);
  asio::co_spawn(ex, outbox->run(), asio::detached);
  TunnelEndpoint tunnels(
      ex, [outbox](std::string frame) { outbox->pushTunnel(std::move(frame)); }, tunnelResolver_);
  outbox->useTunnelMux(tunnels.mux());
  auto reader = [&, ws]() -> asio::awaitable<void> {
    beast::flat_buffer buf;
    for (;;) {
      buf.clear();
      auto [ec, n] = co_await ws->async_read(buf, asio::as_tuple(use_awaitable));
      if (ec) break;
      if (!ws->got_text()) {
        std::string data = beast::buffers_to_string(buf.data());
        if (model::isTunnelFrame(data)) tunnels.onFrame(data);
        continue;
      }
      auto msg = parseBoundedJson(beast::buffers_to_string(buf.data()));
      // What a newer allotd may send besides is not this agent's to act on.
      if (protocol::messageType(msg) != "desired") continue;
      // Whole or not at all: a job missing from a half-read message would be stopped.
      auto decoded = protocol::decodeServerMessage(msg);
      if (!decoded.ok()) {
        ++refusedDesired_;
        spdlog::error(
            "desired state refused ({} so far), keeping the last good one: {} (allotd and this "
            "agent may be of different versions)",
            refusedDesired_, decoded.status().message());
        // allotd hears of it with the next tick's status, not a heartbeat later.
        statusDirty_ = true;
        continue;
      }
      auto& state = std::get<model::DesiredState>(*decoded);
      std::vector<model::DesiredJob> desired = std::move(state.jobs);
      if (state.heartbeatMs) heartbeatMs = *state.heartbeatMs;
      wantedTask_ = std::move(state.task);
      startTaskIfWanted();
      haveDesired_ = true;
      // allotd's word on how much output it holds is the truth for a new connection only; after
      // that, what this side shipped is ahead of it.
      if (!logOffsetsKnown_) {
        for (const auto& d : desired) logShipped_[d.id] = d.logOffset;
        logOffsetsKnown_ = true;
      }
      reconcile(desired);
      imageCommands_ = std::move(state.images);
      logKeep_ = state.logKeep;
      applyImageCommands();
      wake();
    }
    open = false;
    outbox->stop();  // a tick waiting for its messages to be written ends too
    tick.cancel();
  };
  asio::co_spawn(ex, reader(), asio::detached);

  std::string lastStatus;
  TimeMs lastSent = 0;
  TimeMs lastSampled = 0;
  std::string lastImages;  // the image report allotd holds from this connection
  TimeMs lastImagesLooked = 0;
  // A session that got this far was healthy: its end resets the reconnect backoff.
  Status result = Status::Ok();
  while (open) {
    if (!wakeNow) {
      tick.expires_after(kTick);
      co_await tick.async_wait(asio::as_tuple(use_awaitable));
    }
    wakeNow = false;
    if (!open) break;
    // A pull that ended (or was put off) lets its jobs start, or fail, now.
    const bool pullsMoved = images_ && !pulling_.empty() && images_->generation() != pullsSeen_;
    if (waitingForGpus_ || pullsMoved) {
      if (images_) pullsSeen_ = images_->generation();
      reconcile(lastDesired_);
    }
    if (forkServer_) forkServer_->keepRunning();
    {
      std::vector<std::pair<int64_t, std::string>> jupyters;
      for (const auto& d : lastDesired_) {
        if (d.session && !d.cancel && d.session->app.rfind("jupyter-", 0) == 0 &&
            executor_.knows(d.id))
          jupyters.emplace_back(d.id, executor_.workPath(d.id));
      }
      sessions_.refreshActivity(clock_.nowMs(), jupyters);
      sessions_.refreshUsage(clock_.nowMs());
      ssh_.countDirectConnections(clock_.nowMs());
    }
    collectTask();
    startTaskIfWanted();
    // The task's new output; after collectTask, so that a task that just ended has all of its
    // output sent before its result.
    if (taskRunningId_ != 0 || (wantedTask_ && taskResults_.count(wantedTask_->id))) {
      const int64_t id = taskRunningId_ != 0 ? taskRunningId_ : wantedTask_->id;
      if (taskOutputId_ != id) {
        taskOutputId_ = id;
        taskOutputSent_ = 0;
      }
      bool failed = false;
      for (;;) {
        std::string data = readFrom(taskOutputPath(id), taskOutputSent_, kMaxLogChunk);
        if (data.empty()) break;
        const size_t n = data.size();
        outbox->push(model::encodeTaskOutput({id, taskOutputSent_, std::move(data)}), false);
        if (!co_await outbox->drained()) {
          failed = true;
          break;
        }
        taskOutputSent_ += static_cast<int64_t>(n);
        if (static_cast<int64_t>(n) < kMaxLogChunk) break;
      }
      if (failed) break;
    }
    if (std::string result = taskResultToSend(clock_.nowMs(), heartbeatMs); !result.empty()) {
      outbox->push(std::move(result), false);
      if (!co_await outbox->drained()) break;
    }
    auto jobs = actualJobs();
    {
      std::map<int64_t, pid_t> shims;
      for (const auto& a : jobs) {
        if (a.state != model::ActualState::kRunning) continue;
        if (const int pid = executor_.shimPidOf(a.id); pid > 0) shims[a.id] = pid;
      }
      exits.update(shims);
    }
    if (haveDesired_) {
      // Output before status, so that allotd has every byte when it hears a job ended: a job
      // with output still to ship is reported running until it is shipped.
      bool failed = false;
      for (auto& a : jobs) {
        auto it = logShipped_.find(a.id);
        if (it == logShipped_.end()) continue;
        bool behind = false;
        for (int chunks = 0;; ++chunks) {
          auto base = logBase_.find(a.id);
          int64_t local = it->second - (base == logBase_.end() ? 0 : base->second);
          if (local < 0) break;  // allotd holds more than this run wrote: nothing to send
          if (logKeep_.tail > 0 && it->second > logKeep_.head) {
            // Past the head allotd keeps only the last `tail` bytes: what lies further back than
            // that from the log's end now is dropped whatever comes after, so it is not shipped.
            const int64_t size = sizeOfFd(openLogs_.fd(a.id, executor_.logPath(a.id)));
            if (size - local > logKeep_.tail) {
              it->second += size - logKeep_.tail - local;
              local = size - logKeep_.tail;
            }
          }
          if (chunks == kMaxLogChunksPerPass) {
            behind = true;
            break;
          }
          std::string data =
              readAt(openLogs_.fd(a.id, executor_.logPath(a.id)), local, kMaxLogChunk);
          if (data.empty()) break;
          outbox->push(model::encodeLogChunk({a.id, it->second, data}), true);
          if (!co_await outbox->drained()) {
            failed = true;
            break;
          }
          // A desired state read meanwhile may have forgotten the job (its entry, its log).
          it = logShipped_.find(a.id);
          if (it == logShipped_.end()) break;
          it->second += static_cast<int64_t>(data.size());
          if (static_cast<int64_t>(data.size()) < kMaxLogChunk) break;
        }
        if (failed) break;
        if (behind) {
          wakeNow = true;
          if (a.state == model::ActualState::kExited || a.state == model::ActualState::kLost)
            a = stillRunning(std::move(a));
        }
      }
      if (failed) break;
    }
    std::string status = protocol::encode(protocol::StatusReport{std::move(jobs), refusedDesired_});
    auto now = clock_.nowMs();
    if (status != lastStatus || statusDirty_ || now - lastSent >= heartbeatMs) {
      outbox->push(status, false);
      if (!co_await outbox->drained()) break;
      lastStatus = std::move(status);
      lastSent = now;
      statusDirty_ = false;
    }
    // The image cache: prepulls as they go, and its report when it changed (looked at once a
    // second: it reads the store's records).
    applyImageCommands();
    if (haveDesired_ && now - lastImagesLooked >= 1000) {
      lastImagesLooked = now;
      std::string images = imageReport();
      if (!images.empty() && images != lastImages) {
        outbox->push(images, false);
        if (!co_await outbox->drained()) break;
        lastImages = std::move(images);
      }
    }
    if (now - lastSampled >= config_.telemetryIntervalMs) {
      lastSampled = now;
      std::string telemetry = telemetryMessage();
      if (!telemetry.empty()) {
        outbox->push(std::move(telemetry), false);
        if (!co_await outbox->drained()) break;
      }
    }
  }
  outbox->stop();
  tunnels.shutdown();
  boost::system::error_code ignored;
  beast::get_lowest_layer(*ws).socket().close(ignored);
  // Let the reader see the close before its frame goes away with this one.
  while (open) {
    tick.expires_after(std::chrono::milliseconds(10));
    co_await tick.async_wait(asio::as_tuple(use_awaitable));
  }
  co_return result;
}

void Agent::startTaskIfWanted() {
  if (!wantedTask_ || taskRun_.valid()) return;
  const model::HostTask task = *wantedTask_;
  if (taskResults_.count(task.id)) return;
  std::optional<HookRun> hook;
  if (task.hook) {
    HookRun run;
    std::string driver;
    for (const auto& g : gpuList_) {
      if (!g.driverVersion.empty()) {
        driver = g.driverVersion;
        break;
      }
    }
    run.vars = {{"allot_host", credential_.host},
                {"allot_team", task.hook->team},
                {"allot_profile", task.hook->profile},
                {"allot_driver_version", driver},
                {"allot_state_dir", config_.workDir + "/host-state"},
                {"allot_accounts", nlohmann::json::array()}};
    // The Unix accounts to create (docs/access.md): ansible loops over allot_accounts; a script
    // reads $ALLOT_ACCOUNTS (JSON) or the vars file ($ALLOT_HOOK_VARS).
    for (const auto& a : task.hook->accounts)
      run.vars["allot_accounts"].push_back(model::toJson(a));
    run.runDir = config_.workDir + "/hooks/" + std::to_string(task.id);
    hook = std::move(run);
  }
  HostTaskContext ctx;
  if (hook) ctx.hook = std::move(*hook);
  ctx.outputFile = taskOutputPath(task.id);
  ctx.wipe.workDir = config_.workDir;
  ctx.wipe.stateDir = config_.stateDir;
  ctx.wipe.scratchDir = config_.scratchDir;
  ctx.wipe.homeDir = config_.homeDir;
  ctx.wipe.sessionHomeDir =
      config_.sessionHomeDir.empty() ? config_.workDir + "/homes" : config_.sessionHomeDir;
  ctx.wipe.teamDir = config_.teamDir;
  ctx.wipe.currentHookRun = task.id;
  // This agent's jobs and everything they started carry its scratch root in ALLOT_SCRATCH: the
  // wipe kills those, not the jobs of another agent sharing the machine (test clusters, a
  // migration between work dirs).
  ctx.wipe.strayMarker = "ALLOT_SCRATCH=" + config_.scratchDir + "/";
  ctx.wipe.gpus = &gpus_;
  for (const auto& a : executor_.poll()) {
    if (a.state == model::ActualState::kRunning) ctx.wipe.liveJobs.push_back(a.id);
  }
  ctx.wipe.jobCgroups = executor_.leftoverCgroups();
  ctx.health.gpus = &gpus_;
  ctx.health.diskPath = config_.workDir;
  // The agent outlives the task: its destructor waits for taskRun_ (a std::async future).
  ctx.health.xidSource = [this] {
    drainXids();
    std::lock_guard lock(xidMutex_);
    return std::vector<XidEvent>(xidHistory_.begin(), xidHistory_.end());
  };
  spdlog::info("host task {} ({}): starting", task.id, task.purpose);
  taskRunningId_ = task.id;
  taskRun_ = std::async(std::launch::async,
                        [task, ctx = std::move(ctx)] { return runHostTask(task, ctx); });
}

void Agent::collectTask() {
  if (!taskRun_.valid() || taskRun_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return;
  model::HostTaskResult r = taskRun_.get();
  spdlog::info("host task {}: {}{}{}", r.id, r.ok ? "succeeded" : "failed",
               r.failedStep.empty() ? "" : " at ", r.failedStep);
  taskResults_[r.id] = std::move(r);
  taskRunningId_ = 0;
  taskResultSentAt_ = 0;
}

std::string Agent::taskResultToSend(TimeMs now, int64_t heartbeatMs) {
  if (!wantedTask_) return "";
  auto it = taskResults_.find(wantedTask_->id);
  if (it == taskResults_.end()) return "";
  if (taskResultSentAt_ != 0 && now - taskResultSentAt_ < heartbeatMs) return "";
  taskResultSentAt_ = now;
  return model::encodeTaskResult(it->second);
}

}  // namespace allot::agent
