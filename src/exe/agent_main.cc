// allot-agent: one per GPU host. Flags become objects here and nowhere else.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "agent/exec/cgroup_manager.h"
#include "agent/exec/container_config.h"
#include "agent/exec/driver_files.h"
#include "agent/exec/process_executor.h"
#include "agent/exec/run_as.h"
#include "agent/gpu/gpu_provider_factory.h"
#include "agent/host_ops/wipe_roots.h"
#include "agent/runtime/agent.h"
#include "common/build_info.h"
#include "common/log.h"
#include "common/secrets.h"
#include "common/time_format.h"

namespace {

int fail(const std::string& msg) {
  std::cerr << "allot-agent: " << msg << "\n";
  return 1;
}

// allot-job-shim, allot-ssh-bridge and allot-jupyter-forkserver are installed next to allot-agent.
// "50G", "500M", "1T", "123456" (bytes), "none": a size in bytes, powers of 1024; 0 for none.
std::optional<int64_t> parseByteSize(const std::string& text) {
  if (text == "none" || text == "0") return 0;
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (n <= 0) return std::nullopt;
  const std::string unit = text.substr(used);
  int shift = 0;
  if (unit == "K" || unit == "KiB")
    shift = 10;
  else if (unit == "M" || unit == "MiB")
    shift = 20;
  else if (unit == "G" || unit == "GiB")
    shift = 30;
  else if (unit == "T" || unit == "TiB")
    shift = 40;
  else if (!unit.empty())
    return std::nullopt;
  if (n > (std::numeric_limits<int64_t>::max() >> shift)) return std::nullopt;
  return static_cast<int64_t>(n) << shift;
}

std::string besideThisBinary(const char* program) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return program;
  return (self.parent_path() / program).string();
}

}  // namespace

int main(int argc, char** argv) {
  allot::initSecrets();  // libsodium: the image store's logins and auth files
  CLI::App app{"allot-agent: runs Allot workloads on this GPU host"};
  app.set_version_flag("--version", std::string("allot-agent ") + allot::allotVersion());
  std::string server, joinToken, name, gpus = "auto", workDir = "/var/lib/allot-agent";
  std::string logLevel = "info", shim = besideThisBinary("allot-job-shim");
  std::string forkServer = besideThisBinary("allot-jupyter-forkserver");
  std::string sshd = "/usr/sbin/sshd", sshDirectPorts, sshDirectAddress, advertiseAddress;
  std::string cgroupName, scratchDir, homeDir, caFile, teamDir, sessionHomeDir, stateDir;
  // Default: required when root (the only user who can switch), off otherwise.
  std::string runAsOwner = ::geteuid() == 0 ? "required" : "off";
  int standbys = 1;
  std::string shimServer = "on";
  std::string telemetryInterval = "5s";
  std::string imageDir, layerUnpack = besideThisBinary("allot-layer-unpack");
  std::vector<std::string> insecureRegistries;
  app.add_option("--server", server,
                 "allotd URL, e.g. https://allot.example.com:7070 (http:// on a trusted network)")
      ->required();
  app.add_option("--ca-file", caFile,
                 "PEM CA certificate(s) to verify an https:// server with (default: the "
                 "system's trusted CAs)");
  app.add_option("--join-token", joinToken,
                 "join token from `allot host join-token` (first start only); better in the "
                 "environment, where other users of the host cannot read it (ps shows arguments)")
      ->envname("ALLOT_JOIN_TOKEN");
  app.add_option("--name", name, "host name in Allot (default: this machine's hostname)");
  app.add_option("--gpus", gpus,
                 "auto | nvml | sim:SPEC (sim:8xH100, sim:2xA100,2xH100, sim:FILE.toml)");
  app.add_option("--work-dir", workDir,
                 "state, job directories and logs (default /var/lib/allot-agent)");
  app.add_option("--state-dir", stateDir,
                 "job records (spec, shim and outcome of each running job): they must outlive "
                 "the agent, not the host, so tmpfs is right, e.g. /run/allot-agent; logs and "
                 "working directories stay in the work dir (default: the work dir)");
  app.add_option("--scratch-dir", scratchDir,
                 "per-job scratch root: job J gets $ALLOT_SCRATCH=DIR/J; emptied by the wipe "
                 "between tenants (default WORK_DIR/scratch)");
  app.add_option("--home-dir", homeDir,
                 "where team home data lives on this host; its contents are removed by a wipe "
                 "whose storage policy says so (default: none kept here)");
  app.add_option("--session-home-dir", sessionHomeDir,
                 "sessions' local storage: user U's persistent home on this host is DIR/U "
                 "(default WORK_DIR/homes)");
  app.add_option("--team-dir", teamDir,
                 "team storage root on this host: each team's directory DIR/TEAM, owned by root "
                 "and the team's group, mode 2770, given to jobs as $ALLOT_TEAM_DIR; emptied by "
                 "the wipe between tenants like --home-dir (default: none)");
  app.add_option("--run-as-owner", runAsOwner,
                 "required: workloads run as their submitter's uid and gid, never as root, and a "
                 "job without one is refused; off: as this agent's user (default: required when "
                 "root, else off)")
      ->check(CLI::IsMember({"required", "off"}));
  app.add_option("--log-level", logLevel, "trace|debug|info|warn|error");
  app.add_option("--shim", shim, "path of allot-job-shim (default: next to this binary)");
  app.add_option("--jupyter-forkserver", forkServer,
                 "allot-jupyter-forkserver, kept running so that Jupyter sessions start fast, or "
                 "'off' (default: next to this binary, when there)");
  app.add_option("--sshd", sshd,
                 "OpenSSH's sshd, started per connection (sshd -i) for SSH into sessions, or "
                 "'off' (default /usr/sbin/sshd, when there)");
  app.add_option("--ssh-direct-ports", sshDirectPorts,
                 "LO-HI: each session also gets an sshd listening on a port of this range, for "
                 "networks where users reach hosts (default: none; SSH goes through allotd)");
  app.add_option("--ssh-direct-address", sshDirectAddress,
                 "address the direct sshd ports listen on and clients are given (default: all "
                 "addresses, advertised as this machine's hostname)");
  app.add_option("--advertise-address", advertiseAddress,
                 "the address other hosts reach this one at, given to multi-host jobs as "
                 "MASTER_ADDR when their rank 0 runs here (default: the local address of this "
                 "host's connection to allotd)");
  app.add_option("--standby-shims", standbys,
                 "shims kept ready in fresh cgroups, so a job starts without waiting for the "
                 "kernel's cgroup attach (default 1; 0 turns it off)")
      ->check(CLI::Range(0, 16));
  app.add_option("--shim-server", shimServer,
                 "'on': job shims are forked by one allot-job-shim kept running, which saves "
                 "each its program start; 'off': each is spawned (docs/agent.md, \"The shim "
                 "server\"; default on)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--image-dir", imageDir,
                 "where images for jobs are cached: an OCI layout and each layer unpacked once "
                 "(default WORK_DIR/images)");
  std::string imageBudget = "none";
  app.add_option("--image-budget", imageBudget,
                 "most disk the image cache may take, blobs and unpacked layers (50G, 500M; "
                 "default none): after each pull, the least recently used images no job uses "
                 "are removed until it fits");
  app.add_option("--insecure-registry", insecureRegistries,
                 "HOST:PORT of a registry reached over plain HTTP without certificate checks (a "
                 "loopback registry in tests); repeat for several. Only a listed registry may be "
                 "on this host or its link");
  app.add_option("--cgroup-name", cgroupName,
                 "name of this agent's cgroup subtree (default allot-<name>)");
  app.add_option("--telemetry-interval", telemetryInterval,
                 "how often GPUs are sampled and the readings sent to allotd (default 5s, "
                 "least 1s)");
  CLI11_PARSE(app, argc, argv);
  // Read once; nothing the agent starts (hooks, sshd, shims) inherits it.
  ::unsetenv("ALLOT_JOIN_TOKEN");
  auto intervalMs = allot::parseDurationMs(telemetryInterval);
  if (!intervalMs.ok()) {
    return fail("--telemetry-interval: " + intervalMs.status().message());
  }
  if (*intervalMs < allot::agent::kMinTelemetryIntervalMs) {
    return fail("--telemetry-interval: must be at least 1s, not " + telemetryInterval);
  }

  allot::setupLogging("allot-agent", logLevel);
  std::error_code ec;
  std::filesystem::create_directories(workDir, ec);
  if (ec) return fail("cannot create work dir " + workDir + ": " + ec.message());
  workDir = allot::agent::normalPath(workDir);

  if (scratchDir.empty()) scratchDir = workDir + "/scratch";
  scratchDir = allot::agent::normalPath(scratchDir);
  if (!homeDir.empty()) {
    homeDir = allot::agent::normalPath(homeDir);
    // A wipe empties it: the work dir or / given by mistake would lose the agent's own state.
    if (allot::agent::holdsDir(homeDir, workDir))
      return fail("--home-dir: " + homeDir +
                  " cannot be a team home root: it holds the work dir, and a wipe empties it");
  }
  if (runAsOwner == "required" && ::geteuid() != 0)
    return fail(
        "--run-as-owner required: only root can start workloads as other users; run "
        "as root, or pass --run-as-owner off to run every job as this user");
  if (!teamDir.empty()) {
    teamDir = allot::agent::normalPath(teamDir);
    if (allot::agent::holdsDir(teamDir, workDir))
      return fail("--team-dir: " + teamDir +
                  " cannot be the team storage root: it holds the "
                  "work dir");
  }
  if (!stateDir.empty()) {
    stateDir = allot::agent::normalPath(stateDir);
    // Workloads write under these roots, and a wipe empties them: no place for the agent's
    // records of what runs.
    std::string jobsDir = workDir + "/jobs";
    for (const std::string* root : {&scratchDir, &homeDir, &teamDir, &sessionHomeDir, &jobsDir}) {
      if (!root->empty() && allot::agent::holdsDir(allot::agent::normalPath(*root), stateDir))
        return fail("--state-dir: " + stateDir + " is inside " + *root +
                    ", where workloads write; choose a directory of the agent's own");
    }
    std::filesystem::create_directories(std::filesystem::path(stateDir).parent_path(), ec);
    if (ec || (::mkdir(stateDir.c_str(), 0700) != 0 && errno != EEXIST))
      return fail("cannot create state dir " + stateDir + ": " +
                  (ec ? ec.message() : std::strerror(errno)));
    // Checked before it is closed to others, and closed through a descriptor that is the
    // directory itself: a symlink planted there (under /dev/shm, say) is refused, not followed.
    if (auto owned = allot::agent::checkAgentOwnedDir(stateDir, "the state dir"); !owned.ok())
      return fail("--state-dir: " + owned.message());
    const int dirFd = ::open(stateDir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirFd < 0 || ::fchmod(dirFd, 0700) != 0)
      return fail("--state-dir: cannot close " + stateDir + " to others: " + std::strerror(errno));
    ::close(dirFd);
    if (stateDir == workDir) stateDir.clear();
  }
  if (allot::agent::holdsDir(scratchDir, workDir))
    return fail("--scratch-dir: " + scratchDir +
                " cannot be the scratch root: it holds the work dir, and a wipe empties it");
  if (runAsOwner == "required") {
    // Workloads run as their owners and must pass through every directory above their own (the
    // work dir holds job and session directories, the Jupyter fork server's socket): say so now
    // rather than fail each session later with "No such directory".
    for (const std::string* dir : {&workDir, &scratchDir}) {
      std::error_code ec;
      std::filesystem::create_directories(*dir, ec);
      if (ec) return fail("cannot create " + *dir + ": " + ec.message());
      if (auto closed = allot::agent::firstClosedAncestor(*dir); !closed.empty())
        return fail(closed + " lets only its owner through, so workloads (which run as their " +
                    "owners) cannot reach " + *dir +
                    ": allow others through it (chmod o+x) or choose another --work-dir or "
                    "--scratch-dir");
    }
  }

  std::string seed = name.empty() ? workDir : name;
  std::string note;
  auto provider = allot::agent::makeGpuProvider(gpus, seed, &note);
  if (!provider.ok()) return fail(provider.status().message());
  if (!note.empty()) spdlog::warn("{}", note);
  if ((*provider)->simulated()) {
    spdlog::warn("GPUs on this host are SIMULATED ({}); jobs get fake GPU UUIDs", gpus);
  }

  allot::SystemClock clock;
  // One cgroup subtree per agent ("allot-<name>"): an agent removes groups it does not know, so
  // two agents on one machine (tests, a migration) must not share a subtree.
  std::string groupName = cgroupName;
  if (groupName.empty()) groupName = name.empty() ? "allot" : "allot-" + name;
  allot::agent::CgroupManager cgroups(groupName);
  allot::agent::ProcessExecutor executor(workDir, shim, clock, &cgroups, standbys, stateDir);
  executor.setShimServer(shimServer == "on");
  executor.setScratchRoot(scratchDir);
  executor.setRunAsOwner(runAsOwner == "required");
  executor.setTeamRoot(teamDir);
  // What a job in an image with real GPUs gets of the host's driver (read once: a driver
  // upgrade restarts the agent anyway).
  if (!(*provider)->simulated()) executor.setDriverFiles(allot::agent::hostDriverFiles());
  // Jobs in images get the seccomp filter podman gives containers (containers-common, which
  // skopeo brings).
  std::string noImagesBecause;
  {
    std::string seccomp = allot::agent::hostContainerSeccomp();
    if (seccomp.empty())
      noImagesBecause = std::string("no seccomp profile for containers at ") +
                        allot::agent::kContainerSeccompProfile + " (containers-common)";
    executor.setSeccomp(std::move(seccomp));
  }
  // Jobs in images (docs/environments.md): crun runs them, skopeo and allot-layer-unpack fill
  // the store, and each runs as its owner: a container as root without a user namespace would be
  // the host's root with fewer capabilities, which is not confinement enough.
  const std::string crun = allot::agent::ContainerImage{}.crun;
  if (runAsOwner != "required")
    noImagesBecause = "workloads do not run as their owners here (--run-as-owner off)";
  for (const std::string& tool : {crun, std::string("/usr/bin/skopeo"), layerUnpack}) {
    if (noImagesBecause.empty() && ::access(tool.c_str(), X_OK) != 0)
      noImagesBecause = tool + " is missing";
  }
  const auto budget = parseByteSize(imageBudget);
  if (!budget)
    return fail("--image-budget: '" + imageBudget + "' is not a size (50G, 500M, or none)");
  std::unique_ptr<allot::agent::ImageStore> imageStore;
  std::unique_ptr<allot::agent::ImagePuller> imagePuller;
  if (noImagesBecause.empty()) {
    allot::agent::ImageStoreOptions images;
    images.root = imageDir.empty() ? workDir + "/images" : allot::agent::normalPath(imageDir);
    images.unpacker = layerUnpack;
    images.insecureRegistries = insecureRegistries;
    images.budgetBytes = *budget;
    imageStore = std::make_unique<allot::agent::ImageStore>(std::move(images));
    // A budget lowered since the last start is met now, not at the next pull, sparing what
    // the containers the executor re-adopted run in.
    auto inUse = executor.imagesInUse();
    imageStore->setInUse(std::move(inUse.refs), std::move(inUse.layers));
    if (*budget > 0) {
      auto evicted = imageStore->evict();
      if (!evicted.ok())
        spdlog::warn("image store: eviction at start failed: {}", evicted.status().message());
    }
    imagePuller = std::make_unique<allot::agent::ImagePuller>(*imageStore);
  } else {
    spdlog::warn("jobs in images are refused on this host: {}", noImagesBecause);
  }
  allot::agent::AgentConfig cfg{
      server,      joinToken,  name,    workDir, cgroups.mode(),
      *intervalMs, scratchDir, homeDir, caFile,  runAsOwner == "required"};
  if (forkServer == "off" || !std::filesystem::exists(forkServer)) forkServer.clear();
  cfg.forkServer = forkServer;
  if (sshd == "off" || !std::filesystem::exists(sshd) || !std::filesystem::exists(cfg.sshKeygen))
    sshd.clear();
  cfg.sshd = sshd;
  // Next to this binary, like the shim; without it sessions in images get no SSH.
  if (const std::string bridge = besideThisBinary("allot-ssh-bridge");
      std::filesystem::exists(bridge))
    cfg.sshBridge = bridge;
  if (!sshDirectPorts.empty()) {
    int lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(sshDirectPorts);
    if (!(range >> lo >> dash >> hi) || dash != '-' || !range.eof() || lo < 1 || hi > 65535 ||
        lo > hi)
      return fail("--ssh-direct-ports: expected LO-HI, like 22000-22999, not '" + sshDirectPorts +
                  "'");
    if (sshd.empty()) return fail("--ssh-direct-ports: needs sshd (--sshd)");
    cfg.sshDirectPortLo = lo;
    cfg.sshDirectPortHi = hi;
  }
  cfg.sshDirectAddress = sshDirectAddress;
  if (!advertiseAddress.empty() && !allot::model::isHostAddress(advertiseAddress))
    return fail("--advertise-address: '" + advertiseAddress +
                "' is not an IP address or a DNS name");
  cfg.advertiseAddress = advertiseAddress;
  cfg.teamDir = teamDir;
  cfg.stateDir = stateDir;
  if (!sessionHomeDir.empty()) cfg.sessionHomeDir = allot::agent::normalPath(sessionHomeDir);
  allot::agent::Agent agent(cfg, **provider, executor, clock);
  agent.setImages(imageStore.get(), imagePuller.get(), noImagesBecause);
  auto joined = agent.ensureJoined();
  if (!joined.ok()) return fail(joined.message());
  spdlog::info("agent for host '{}' starting: gpus={} provider={} cgroup={} run_as_owner={}",
               agent.hostName(), agent.inventory().gpus.size(), (*provider)->name(), cgroups.mode(),
               runAsOwner);
  if (runAsOwner == "off")
    spdlog::warn(
        "workloads run as this agent's user (uid {}), not as their owners "
        "(--run-as-owner off)",
        ::geteuid());

  boost::asio::io_context io(1);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int sig) {
    // Jobs keep running: they belong to the host, not to this process, and are re-adopted.
    spdlog::info("signal {}: agent stopping; running jobs continue", sig);
    io.stop();
  });
  agent.run(io);
  io.run();
  return 0;
}
