// Cluster operations driven by agents: their connections, reports, output and liveness, and the
// desired state allotd sends them. See cluster.h.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "common/log.h"
#include "common/utf8.h"
#include "common/version.h"
#include "control/cluster.h"

namespace allot::control {

using model::Job;
using model::JobState;
using model::Rank;
using model::RankState;

namespace {

// What of an agent's message about a job (why it failed to start, was lost, or is pulling) goes
// into the job's reason, which every listing of its team carries.
constexpr size_t kMaxAgentMessageBytes = 512;

// A time a host reports, in allotd's frame: the host's clock is not allotd's, and its report may
// be wrong or hostile. Not before the job was placed nor after now (none given: now), so that a
// clock ahead cannot put off --max-runtime (now - startedAt), nor one behind add GPU-hours to the
// team's account, and no arithmetic on it overflows.
TimeMs hostTime(TimeMs reported, TimeMs placedAt, TimeMs now) {
  if (reported == 0) return now;
  return std::clamp(reported, std::min(placedAt, now), now);
}

bool rankEnded(const Rank& r) {
  return r.state == RankState::kExited || r.state == RankState::kFailedToStart ||
         r.state == RankState::kLost;
}

bool rankFailed(const Rank& r) {
  return r.state == RankState::kFailedToStart || r.state == RankState::kLost ||
         (r.state == RankState::kExited && !(r.exitCode && *r.exitCode == 0));
}

std::string gpuKey(const model::Gpu& g) {
  return !g.uuid.empty() ? g.uuid : "#" + std::to_string(g.index);
}

// What a hello is measured against (model::Host::admittedMemoryMib), where it is not known yet (a
// host stored before these were kept): the figures the host holds.
void knowAdmittedSizes(model::Host& h) {
  if (h.admittedMemoryMib == 0) h.admittedMemoryMib = h.memoryMib;
  for (const auto& g : h.gpus) h.admittedGpuMemoryMib.emplace(gpuKey(g), g.memoryMib);
}

int64_t admittedGpuMemory(const model::Host& h, const model::Gpu& held) {
  auto it = h.admittedGpuMemoryMib.find(gpuKey(held));
  return it != h.admittedGpuMemoryMib.end() ? it->second : held.memoryMib;
}

// After a hello: out of service (an admin looks before it serves again) the figures it reported
// are the mark from now on; in service the mark stays. Only for the GPUs it has: one that comes
// back is new hardware, fenced as such.
void admitSizes(model::Host& h, bool inService) {
  if (!inService) {
    h.admittedMemoryMib = h.memoryMib;
    h.admittedGpuMemoryMib.clear();
  }
  std::map<std::string, int64_t> kept;
  for (const auto& g : h.gpus) {
    auto it = h.admittedGpuMemoryMib.find(gpuKey(g));
    kept[gpuKey(g)] = it != h.admittedGpuMemoryMib.end() ? it->second : g.memoryMib;
  }
  h.admittedGpuMemoryMib = std::move(kept);
}

// What a new inventory claims beyond what the host had (its sizes: beyond what it was admitted
// with): GPUs it did not have, other models, more GPU memory, more CPUs or memory, another GPU
// provider. Empty when it claims no more (GPUs that vanished are not growth: a GPU off the bus
// shows as its jobs failing).
std::string inventoryGrowth(const model::Host& h, const model::Inventory& inv) {
  std::vector<std::string> what;
  for (const auto& g : inv.gpus) {
    const model::Gpu* old = nullptr;
    for (const auto& o : h.gpus) {
      if (!g.uuid.empty() ? o.uuid == g.uuid : o.index == g.index) old = &o;
    }
    if (old == nullptr) {
      what.push_back("a GPU " + std::to_string(g.index) + " (" + g.model + ") it did not have");
    } else if (old->model != g.model) {
      what.push_back("GPU " + std::to_string(g.index) + " as " + g.model + ", not " + old->model);
    } else if (const int64_t was = admittedGpuMemory(h, *old); g.memoryMib > was + was / 50) {
      // ECC off or a new driver moves the total a little; 2% more is another GPU.
      what.push_back("more memory on GPU " + std::to_string(g.index));
    }
  }
  if (inv.cpus > h.cpus && h.cpus > 0)
    what.push_back(std::to_string(inv.cpus) + " CPUs, not " + std::to_string(h.cpus));
  // Memory moves a little with kernels and firmware; 5% more is a different machine.
  if (const int64_t was = h.admittedMemoryMib; was > 0 && inv.memoryMib > was + was / 20)
    what.push_back(std::to_string(inv.memoryMib) + " MiB of memory, not " + std::to_string(was));
  if (inv.gpuProvider != h.gpuProvider && !h.gpuProvider.empty())
    what.push_back("GPU provider " + inv.gpuProvider + ", not " + h.gpuProvider);
  std::string out;
  for (const auto& w : what) out += (out.empty() ? "" : "; ") + w;
  return out;
}

}  // namespace

// ---- Agents ------------------------------------------------------------------------------

void Cluster::addRendezvous(const Job& j, int rank, model::DesiredJob& d) const {
  // What torchrun, torch.distributed's env:// and NCCL read (docs/scheduler.md, "Multi-host
  // jobs"). One rank per host, so a rank is a node: LOCAL_RANK 0 of LOCAL_WORLD_SIZE 1, and the
  // PET_ variables let `torchrun --nproc_per_node N script.py` find the other nodes by itself.
  const model::Host& master = world_.hosts.at(j.ranks.front().host);
  std::string addr = master.address.empty() ? master.name : master.address;
  // An agent beside allotd reaches it over loopback, which only ranks on that same machine can
  // use: when another rank's host is reached elsewhere (or says nothing of where), its name is
  // the better guess.
  auto loopback = [](const std::string& a) { return a.rfind("127.", 0) == 0 || a == "::1"; };
  if (loopback(addr)) {
    for (const auto& k : j.ranks) {
      const auto h = world_.hosts.find(k.host);
      if (h != world_.hosts.end() && !loopback(h->second.address)) addr = master.name;
    }
  }
  std::string hosts;
  for (const auto& k : j.ranks) hosts += (hosts.empty() ? "" : ",") + k.host;
  const std::string r = std::to_string(rank), n = std::to_string(j.ranks.size());
  d.env["RANK"] = r;
  d.env["WORLD_SIZE"] = n;
  d.env["NODE_RANK"] = r;
  d.env["GROUP_RANK"] = r;
  d.env["LOCAL_RANK"] = "0";
  d.env["LOCAL_WORLD_SIZE"] = "1";
  d.env["MASTER_ADDR"] = addr;
  d.env["PET_NNODES"] = n;
  d.env["PET_NODE_RANK"] = r;
  d.env["PET_MASTER_ADDR"] = addr;
  if (j.masterPort != 0) {
    d.env["MASTER_PORT"] = std::to_string(j.masterPort);
    d.env["PET_MASTER_PORT"] = d.env["MASTER_PORT"];
  } else if (rank == 0) {
    d.chooseMasterPort = true;  // first start: its agent picks and sets the port
  }
  // (A later rank with no port: rank 0 ended before it reported one; it starts without.)
  d.env["ALLOT_RANK"] = r;
  d.env["ALLOT_HOSTS"] = hosts;
}

std::string Cluster::desiredMessage(const std::string& host) {
  std::vector<model::DesiredJob> out;
  auto hj = world_.hostJobs().find(host);
  const auto& h = world_.hosts.at(host);
  size_t carried = 0;  // bytes of commands and environments in this message (kDesiredSpecBudget)
  if (hj != world_.hostJobs().end()) {
    for (int64_t id : hj->second) {
      if (placementsInFlight_.count(id)) continue;
      const Job& j = world_.job(id);
      const int rank = model::rankOn(j, host);
      const Rank& placed = j.ranks[rank];
      const auto& gpuIndices = placed.gpuIndices;
      model::DesiredJob d;
      d.id = j.id;
      // A preempted job is stopped like a cancelled one, with the preemption grace; so are the
      // ranks of a gang one of whose ranks failed. An eviction not yet durable is not told: a
      // crash before the commit would kill a job the store still thinks runs.
      const bool evict = j.evicting && !evictionsInFlight_.count(j.id);
      d.cancel = j.cancelRequested || evict || j.failedRank >= 0;
      d.graceMs = evict && !j.cancelRequested ? options_.preemptGraceMs : options_.cancelGraceMs;
      // The command and environment only while the agent may still have to start the job, and
      // only within the budget: the rest wait for a later message (agent_protocol.h).
      const bool mayStart = !d.cancel && (isGang(j) ? placed.state == RankState::kPending
                                                    : j.state == JobState::kScheduled ||
                                                          j.state == JobState::kPulling);
      const auto bytes = static_cast<size_t>(specBytes(j));
      if (mayStart && (carried == 0 || carried + bytes <= model::kDesiredSpecBudget)) {
        carried += bytes;
        d.command = j.command;
        d.env = j.env;
      } else {
        d.deferred = mayStart;
        // What a simulated host reports as the job's utilisation (docs/agent.md) is all of the
        // environment a started job still needs.
        if (auto u = j.env.find("ALLOT_SIM_GPU_UTIL"); u != j.env.end()) d.env.insert(*u);
      }
      if (isGang(j) && !d.command.empty()) {
        if (j.masterPort == 0 && rank > 0 && !rankEnded(j.ranks.front())) {
          // The rendezvous port is rank 0's agent's to choose: this rank starts once it has.
          d.command.clear();
          d.env.clear();
          d.deferred = true;
        } else {
          addRendezvous(j, rank, d);
        }
      }
      if (j.arrayId != 0 && !d.command.empty()) {
        d.env["ALLOT_ARRAY_ID"] = std::to_string(j.arrayId);
        d.env["ALLOT_ARRAY_INDEX"] = std::to_string(j.arrayIndex);
      }
      if (!d.command.empty()) {
        d.workdir = j.workdir;
        d.image = j.image;
        // The team's login to the registry, only while the job may still start.
        if (j.state != JobState::kRunning) d.registryAuth = registryLogins_.authFor(j);
      }
      if (j.resources.gpuMilli < 1000 && !gpuIndices.empty() && !d.command.empty()) {
        // A fraction of a shared GPU: say how much, so the job (or MPS, when the host runs its
        // daemon) can hold itself to it. Allot places fractions; it does not slice the GPU.
        char fraction[16];
        std::snprintf(fraction, sizeof fraction, "%g", j.resources.gpuMilli / 1000.0);
        d.env["ALLOT_GPU_FRACTION"] = fraction;
        d.env.emplace("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                      std::to_string((j.resources.gpuMilli + 9) / 10));
        for (const auto& g : h.gpus) {
          if (g.index == gpuIndices.front() && g.memoryMib > 0)
            d.env["ALLOT_GPU_MEMORY_MIB"] =
                std::to_string(g.memoryMib * j.resources.gpuMilli / 1000);
        }
      }
      d.gpuIndices = gpuIndices;
      d.gpuUuids = placed.gpuUuids;
      for (int idx : gpuIndices) {
        for (const auto& g : h.gpus) {
          if (g.index == idx) d.gpuMinors.push_back(g.minor);
        }
      }
      d.cpuMillis = j.resources.cpuMillis;
      d.memoryMib = j.resources.memoryMib;
      d.logOffset = logs_.received(j.id, rank);
      d.runAs = access_.runAsOf(j);
      if (j.session) {
        d.session = model::DesiredSession{
            j.session->app, j.session->storage, {}, j.user, options_.sessionSharedDir};
        // Sent with every push: a key the owner removes stops working at the next connection,
        // and an owner who left the session's team (or was disabled) has none there.
        if (auto u = world_.users.find(j.user);
            u != world_.users.end() && u->second.teams.count(j.team) && !u->second.disabled)
          for (const auto& k : u->second.sshKeys)
            d.session->sshKeys.push_back(model::authorizedKeysLine(k));
      }
      out.push_back(std::move(d));
    }
  }
  const bool anyDeferred =
      std::any_of(out.begin(), out.end(), [](const model::DesiredJob& d) { return d.deferred; });
  if (anyDeferred) {
    deferredHosts_.insert(host);
  } else {
    deferredHosts_.erase(host);
  }
  model::ImageCommands images{h.imagePrunes, h.imagePrepulls, {}};
  for (const auto& ref : h.imagePrepulls) {
    const std::string team = ImageCacheService::prepullTeam(h, ref);
    if (team.empty()) continue;
    if (auto auth = registryLogins_.authFor(team, ref, "the prepull of " + ref + " on " + host))
      images.prepullLogins[ref] = std::move(*auth);
  }
  return model::encodeDesired(out, options_.heartbeatMs, h.task, images,
                              {logs_.headBytes(), logs_.tailBytes()});
}

void Cluster::push(const std::set<std::string>& hosts) {
  for (const auto& h : hosts) {
    auto it = links_.find(h);
    if (it != links_.end() && world_.hosts.count(h)) it->second->send(desiredMessage(h));
  }
}

Change<int> Cluster::agentConnected(const std::string& host, AgentLink* link,
                                    const model::Inventory& inv,
                                    const std::vector<model::ActualJob>& jobs) {
  Change<int> c;
  c.value = 0;
  auto& h = world_.hosts.at(host);
  links_[host] = link;
  const TimeMs now = clock_.nowMs();
  LinkHistory& lh = linkHistory_[host];
  if (lh.disconnectedAt != 0 && now - lh.disconnectedAt >= options_.lostAfterMs) {
    lh.awaySince = 0;  // one gap as long as --lost-after: an outage of its own, now over
    lh.flapped = false;
  } else if (lh.awaySince == 0) {
    lh.awaySince = h.unreachableSince;
  }
  lh.connectedAt = now;
  h.state = model::HostState::kOnline;
  h.unreachableSince = 0;
  h.lastSeenAt = now;
  // A host already admitted that now claims more hardware is fenced for an admin's review: a
  // compromised host would otherwise draw other teams' larger jobs, and their secrets, to it.
  const bool admitted =
      h.adminState == model::AdminState::kAvailable || h.adminState == model::AdminState::kDraining;
  knowAdmittedSizes(h);
  if (std::string grew = inventoryGrowth(h, inv); !grew.empty()) {
    spdlog::warn("host {}: its agent claims {}", host, grew);
    if (admitted) {
      hosts_.transitionHost(h, model::AdminState::kMaintenance, kSystemActor,
                            "its inventory changed (" + grew + "); check the host, then resume it",
                            c.batch);
    }
  }
  // The agent's inventory is the truth about its hardware. GPUs that held jobs keep their
  // indexes; a GPU that vanished shows up as its jobs failing on the host.
  model::applyInventory(h, inv);
  admitSizes(h, h.adminState == model::AdminState::kAvailable ||
                    h.adminState == model::AdminState::kDraining);
  if (h.adminState == model::AdminState::kRegistering) {
    // First word from a new host: check it before it takes work.
    hosts_.transitionHost(h, model::AdminState::kCommissioning, kSystemActor, "new host", c.batch);
    model::HostTask task;
    task.purpose = "commissioning";
    if (auto prof = options_.hookProfiles.find(options_.lifecycle.commissionProfile);
        !options_.lifecycle.commissionProfile.empty() && prof != options_.hookProfiles.end()) {
      task.hook = model::HookSpec{0,
                                  prof->first,
                                  h.dedicatedTo,
                                  prof->second.kind,
                                  prof->second.path,
                                  options_.lifecycle.taskTimeoutMs,
                                  {}};
    }
    task.health = hosts_.healthStep(h, true);
    hosts_.startTask(h, std::move(task), c.batch);
  } else if (h.expectedGpuCount < 0) {
    // Commissioned before health checks knew what to expect: what it has now is the baseline.
    h.expectedGpuCount = static_cast<int>(h.gpus.size());
    h.expectedGpuModels.clear();
    for (const auto& g : h.gpus) h.expectedGpuModels.push_back(g.model);
  }
  c.batch.add(store::PutHost{h});
  spdlog::info("agent connected: host={} gpus={} jobs_reported={}", host, h.gpus.size(),
               jobs.size());

  std::set<int64_t> reported;
  for (const auto& a : jobs) {
    reported.insert(a.id);
    applyActual(host, a, c.batch, c.pushHosts);
  }
  // A job allotd thinks runs there but the agent does not know was lost with the agent's state.
  auto hj = world_.hostJobsOf(host);  // copy: finishing jobs edits the index
  for (int64_t id : hj) {
    Job& j = world_.job(id);
    if (reported.count(id) || model::isTerminal(j.state)) continue;
    if (isGang(j)) {
      Rank& k = j.ranks[model::rankOn(j, host)];
      if (k.state == RankState::kRunning) {
        model::ActualJob a;
        a.id = id;
        a.state = model::ActualState::kLost;
        a.message = "the agent no longer knows this job";
        applyActual(host, a, c.batch, c.pushHosts);
      }
    } else if (j.state == JobState::kRunning) {
      finishJob(j, JobState::kLost, "the agent on " + host + " no longer knows this job", c.batch);
    }
  }
  c.pushHosts.insert(host);
  if (onQueueChanged_) onQueueChanged_();
  return c;
}

Change<int> Cluster::agentStatus(const std::string& host,
                                 const std::vector<model::ActualJob>& jobs) {
  Change<int> c;
  c.value = 0;
  auto it = world_.hosts.find(host);
  if (it == world_.hosts.end()) return c;
  it->second.lastSeenAt = clock_.nowMs();
  for (const auto& a : jobs) applyActual(host, a, c.batch, c.pushHosts);
  forgottenBy(host, jobs);
  return c;
}

void Cluster::forgottenBy(const std::string& host, const std::vector<model::ActualJob>& reported) {
  bool freed = false;
  for (auto it = lastRunOn_.begin(); it != lastRunOn_.end();) {
    const bool still = std::any_of(reported.begin(), reported.end(),
                                   [&](const model::ActualJob& a) { return a.id == it->first; });
    if (!still) it->second.erase(host);
    if (it->second.empty()) {
      it = lastRunOn_.erase(it);
      freed = true;
    } else {
      ++it;
    }
  }
  if (freed && onQueueChanged_) onQueueChanged_();
}

bool Cluster::noteImageDigest(Job& j, const model::ActualJob& a) {
  // What the reference resolved to on the host: shown with the job, so that a rerun can pin it.
  // A requeued run may resolve a moved tag anew: the last one wins.
  if (j.image.empty() || a.imageDigest.empty()) return false;
  // What the image declared it needs of the driver, for `job show` (a host that satisfied it).
  bool changed = false;
  if (!a.imageMinCuda.empty() && a.imageMinCuda != j.imageMinCuda) {
    j.imageMinCuda = a.imageMinCuda;
    changed = true;
  }
  if (a.imageDigest == j.imageDigest) return changed;
  j.imageDigest = a.imageDigest;
  return true;
}

bool Cluster::imageNeedsNewerCuda(const Job& j, const std::string& host,
                                  const model::ActualJob& a) const {
  // A job being stopped (cancelled, preempted, requeued) ends as that asks instead.
  if (j.image.empty() || a.imageMinCuda.empty() || j.cancelRequested || j.evicting ||
      !j.requeueRequestedBy.empty() ||
      (j.state != JobState::kScheduled && j.state != JobState::kPulling))
    return false;
  auto h = world_.hosts.find(host);
  return h != world_.hosts.end() &&
         !versionAtLeast(model::hostCudaVersion(h->second), a.imageMinCuda);
}

void Cluster::requeueForImageCuda(Job& j, const std::string& host, const model::ActualJob& a,
                                  store::WriteBatch& batch) {
  // The image said what it needs only once pulled (no host held it at submission): the job goes
  // back to the queue with that minimum, so that the scheduler places it where the driver has it.
  Job before = j;
  j.imageMinCuda = a.imageMinCuda;
  if (!versionAtLeast(j.resources.minCuda, a.imageMinCuda)) j.resources.minCuda = a.imageMinCuda;
  j.state = JobState::kQueued;
  j.reason = "requeued: its image needs CUDA " + a.imageMinCuda +
             " (NVIDIA_REQUIRE_CUDA), and host " + host + "'s driver has " +
             model::hostCudaVersion(world_.hosts.at(host));
  lastRunOn_[j.id].insert(host);
  pullEnded(j);
  j.ranks.clear();
  j.scheduledAt = 0;
  j.startedAt = 0;
  j.finishedAt = 0;
  updateJob(j, before, batch);
  if (onQueueChanged_) onQueueChanged_();
}

void Cluster::pullReported(Job& j, const model::ActualJob& a) {
  pulls_[j.id] = {a.pullBytes, a.pullTotal};
  // A job being stopped keeps the reason that says who stopped it, for how it ends.
  if (j.cancelRequested || j.evicting || !j.requeueRequestedBy.empty()) return;
  // The agent's message says why a pull is slow to end (a registry that does not answer, and
  // when it tries again); the bytes are in pullOf(), not in the stored reason.
  j.reason = a.message.empty()
                 ? "pulling image " + j.image
                 : "pulling image " + j.image + ": " + cutUtf8(a.message, kMaxAgentMessageBytes);
}

void Cluster::pullEnded(Job& j) {
  pulls_.erase(j.id);
  if (j.reason.rfind("pulling image ", 0) == 0) j.reason.clear();
}

std::optional<Cluster::PullProgress> Cluster::pullOf(int64_t id) const {
  auto it = pulls_.find(id);
  if (it == pulls_.end()) return std::nullopt;
  return it->second;
}

void Cluster::applyActual(const std::string& host, const model::ActualJob& a,
                          store::WriteBatch& batch, std::set<std::string>& push) {
  auto it = world_.jobs.find(a.id);
  if (it != world_.jobs.end() && model::rankOn(it->second, host) < 0 &&
      !model::isTerminal(it->second.state)) {
    // An agent speaks only for its own host: a report about work placed elsewhere (a forged one,
    // or a stale one of a job requeued elsewhere) changes nothing. Throttled: a message of a
    // host's can name any number of them.
    static ThrottledWarnings ignored("");
    ignored.warn("agent report ignored: host={} job={} (the job is not placed on this host)", host,
                 a.id);
  }
  if (it == world_.jobs.end() || model::rankOn(it->second, host) < 0 ||
      model::isTerminal(it->second.state)) {
    // Unknown here, ended here, or placed elsewhere: the agent stops and forgets it when it sees
    // the desired state without it.
    push.insert(host);
    return;
  }
  Job& j = it->second;
  if (isGang(j)) {
    applyRankActual(j, host, a, batch, push);
    return;
  }
  if (j.session && a.session && a.state == model::ActualState::kRunning)
    sessions_.reported(j, *a.session);
  if (a.state == model::ActualState::kFailedToStart && imageNeedsNewerCuda(j, host, a)) {
    requeueForImageCuda(j, host, a, batch);
    push.insert(host);
    return;
  }
  Job before = j;
  const bool digestChanged = noteImageDigest(j, a);
  switch (a.state) {
    case model::ActualState::kPulling:
      if (j.state == JobState::kScheduled || j.state == JobState::kPulling) {
        j.state = JobState::kPulling;
        pullReported(j, a);
        if (j.reason != before.reason || j.state != before.state || digestChanged)
          updateJob(j, before, batch);
      }
      return;
    case model::ActualState::kRunning:
      pullEnded(j);
      if (j.state == JobState::kScheduled || j.state == JobState::kPulling) {
        j.state = JobState::kRunning;
        j.startedAt = hostTime(a.startedAt, j.scheduledAt, clock_.nowMs());
        sessions_.started(j);
        updateJob(j, before, batch);
        // Specs held back for budget go out as the jobs before them start.
        if (deferredHosts_.count(host)) push.insert(host);
      } else if (digestChanged || j.reason != before.reason) {
        updateJob(j, before, batch);
      }
      return;
    case model::ActualState::kExited: {
      // A requeued job placed again where it ran before: the agent may still report the exit of
      // the run that was preempted until it has seen the new desired state. That exit is older
      // than this placement.
      if (j.preemptions > 0 && a.finishedAt != 0 && a.finishedAt < j.scheduledAt) {
        push.insert(host);
        return;
      }
      j.exitCode = a.exitCode;
      j.signal = a.signal;
      const TimeMs now = clock_.nowMs();
      if (!j.startedAt && a.startedAt) j.startedAt = hostTime(a.startedAt, j.scheduledAt, now);
      j.finishedAt = hostTime(a.finishedAt, j.startedAt ? j.startedAt : j.scheduledAt, now);
      std::string how = a.exitCode ? "exited with code " + std::to_string(*a.exitCode)
                        : a.signal ? "killed by signal " + std::to_string(*a.signal)
                                   : "stopped before it started";
      if (j.cancelRequested) {
        // The reason recorded when the cancel was asked for says why ("cancel requested by
        // alice", "exceeded its maximum runtime of 2h"); `how` says how it ended.
        finishJob(j, JobState::kCancelled, (j.reason.empty() ? "cancelled" : j.reason) + "; " + how,
                  batch);
      } else if (j.evicting) {
        preemptedJobStopped(j, how, batch);
      } else if (a.exitCode && *a.exitCode == 0) {
        finishJob(j, JobState::kSucceeded, how, batch);
      } else {
        finishJob(j, JobState::kFailed, how, batch);
      }
      push.insert(host);
      return;
    }
    case model::ActualState::kFailedToStart:
      j.finishedAt = hostTime(a.finishedAt, j.scheduledAt, clock_.nowMs());
      finishJob(j, JobState::kFailed,
                "failed to start job " + std::to_string(j.id) + " on host " + host + ": " +
                    cutUtf8(a.message, kMaxAgentMessageBytes),
                batch);
      push.insert(host);
      return;
    case model::ActualState::kLost:
      finishJob(j, JobState::kLost,
                "lost on " + host + ": " + cutUtf8(a.message, kMaxAgentMessageBytes), batch);
      push.insert(host);
      return;
  }
}

void Cluster::applyRankActual(Job& j, const std::string& host, const model::ActualJob& a,
                              store::WriteBatch& batch, std::set<std::string>& push) {
  const int rank = model::rankOn(j, host);
  Rank& k = j.ranks[rank];
  if (rankEnded(k)) return;  // its end is known; later reports repeat it
  Job before = j;
  const auto now = clock_.nowMs();
  const bool digestChanged = noteImageDigest(j, a);
  if (rank == 0 && j.masterPort == 0 && a.masterPort > 0) {
    // The other ranks were held back for this port; they go out once it is durable. A rank 0
    // that ends at once is first seen exited: its report still carries the port.
    j.masterPort = a.masterPort;
    for (const auto& h : model::rankHosts(j)) push.insert(h);
  }
  switch (a.state) {
    case model::ActualState::kPulling:
      // The gang pulls while any of its ranks does; its ranks stay pending until they run.
      if (j.state == JobState::kScheduled || j.state == JobState::kPulling) {
        j.state = JobState::kPulling;
        pullReported(j, a);
      }
      if (j.state != before.state || j.reason != before.reason || digestChanged ||
          j.masterPort != before.masterPort)
        updateJob(j, before, batch);
      return;
    case model::ActualState::kRunning:
      if (isGang(j) && rank == 0 && j.masterPort == 0 && a.masterPort <= 0 && j.failedRank < 0 &&
          !j.cancelRequested && !j.evicting) {
        // An agent that chose a port reports it with the job's first report. None: it did not
        // (an agent older than allotd), or lost it in a restart before telling. The other ranks
        // would wait for it for ever, holding their GPUs: the gang fails now, saying why.
        k.message =
            "reported no rendezvous port (an agent older than allotd, or one restarted "
            "before it reported the port); requeue the job";
        j.failedRank = 0;
        j.reason = "rank 0 on " + host + " " + k.message;
        for (const auto& h : model::rankHosts(j)) push.insert(h);
        spdlog::warn("job {}: {}", j.id, j.reason);
      }
      if (k.state == RankState::kRunning) {
        if (j.masterPort != before.masterPort || digestChanged) updateJob(j, before, batch);
        return;
      }
      k.state = RankState::kRunning;
      if (deferredHosts_.count(host)) push.insert(host);
      if (const TimeMs started = hostTime(a.startedAt, j.scheduledAt, now);
          !j.startedAt || started < j.startedAt)
        j.startedAt = started;
      // Running once every rank runs: until then the gang is still starting.
      if ((j.state == JobState::kScheduled || j.state == JobState::kPulling) &&
          std::all_of(j.ranks.begin(), j.ranks.end(),
                      [](const Rank& r) { return r.state == RankState::kRunning; })) {
        j.state = JobState::kRunning;
        pullEnded(j);
      }
      updateJob(j, before, batch);
      return;
    case model::ActualState::kExited:
      k.state = RankState::kExited;
      k.exitCode = a.exitCode;
      k.signal = a.signal;
      // A rank failed for what it did not report (no port) keeps that as its reason.
      if (j.failedRank != rank || k.message.empty()) {
        k.message = a.exitCode ? "exited with code " + std::to_string(*a.exitCode)
                    : a.signal ? "killed by signal " + std::to_string(*a.signal)
                               : "stopped before it started";
      }
      break;
    case model::ActualState::kFailedToStart:
      k.state = RankState::kFailedToStart;
      k.message = "failed to start: " + cutUtf8(a.message, kMaxAgentMessageBytes);
      break;
    case model::ActualState::kLost:
      k.state = RankState::kLost;
      k.message = "lost: " + cutUtf8(a.message, kMaxAgentMessageBytes);
      break;
  }
  if (!j.startedAt && a.startedAt) j.startedAt = hostTime(a.startedAt, j.scheduledAt, now);
  const std::string what = "rank " + std::to_string(rank) + " on " + host + " " + k.message;
  if (rankFailed(k) && j.failedRank < 0 && !j.cancelRequested && !j.evicting) {
    // The gang cannot go on without it: the other ranks are stopped like a cancel.
    j.failedRank = rank;
    j.reason = what + "; stopping the other ranks";
    for (const auto& h : model::rankHosts(j)) push.insert(h);
    spdlog::info("job {}: {}; stopping the other ranks", j.id, what);
  }
  push.insert(host);
  if (rank == 0 && j.masterPort == 0) {
    // Ended before it reported a port: the ranks held back for one start without it.
    for (const auto& h : model::rankHosts(j)) push.insert(h);
  }
  if (!std::all_of(j.ranks.begin(), j.ranks.end(), rankEnded)) {
    updateJob(j, before, batch);
    return;
  }
  // Every rank has stopped: the job ends.
  j.finishedAt = hostTime(a.finishedAt, j.startedAt ? j.startedAt : j.scheduledAt, now);
  if (j.failedRank >= 0) {
    const Rank& f = j.ranks[j.failedRank];
    j.exitCode = f.exitCode;
    j.signal = f.signal;
  } else {
    j.exitCode = j.ranks.front().exitCode;
    j.signal = j.ranks.front().signal;
  }
  const bool lost = std::any_of(j.ranks.begin(), j.ranks.end(),
                                [](const Rank& r) { return r.state == RankState::kLost; });
  if (j.cancelRequested) {
    finishJob(j, JobState::kCancelled,
              (before.reason.empty() ? "cancelled" : before.reason) + "; every rank stopped",
              batch);
  } else if (j.evicting) {
    preemptedJobStopped(j, "every rank stopped", batch);
  } else if (j.failedRank >= 0) {
    const Rank& f = j.ranks[j.failedRank];
    finishJob(j, lost ? JobState::kLost : JobState::kFailed,
              "rank " + std::to_string(j.failedRank) + " on " + f.host + " " + f.message, batch);
  } else {
    finishJob(j, JobState::kSucceeded,
              "all " + std::to_string(j.ranks.size()) + " ranks exited with code 0", batch);
  }
}

Status Cluster::agentLog(const std::string& host, const model::LogChunk& chunk) {
  auto it = world_.jobs.find(chunk.job);
  const int rank = it == world_.jobs.end() ? -1 : model::rankOn(it->second, host);
  if (rank < 0) {
    static ThrottledWarnings ignored("");  // as many as a host sends
    ignored.warn("agent output ignored: host={} job={} (the job is not placed on this host)", host,
                 chunk.job);
    return Status::NotFound("no job " + std::to_string(chunk.job) + " on host " + host);
  }
  // The agent sends a job's output before the status that says it ended, so an ended job has
  // all of it: more is refused (and its log was sealed when it ended).
  if (model::isTerminal(it->second.state))
    return Status::FailedPrecondition("job " + std::to_string(chunk.job) + " has ended");
  return logs_.append(chunk.job, chunk.offset, chunk.data, rank, clock_.nowMs());
}

Status Cluster::agentTelemetry(const std::string& host, const model::Telemetry& t) {
  if (t.host != host) {
    return Status::PermissionDenied("telemetry names host '" + t.host + "' but came from '" + host +
                                    "'");
  }
  auto h = world_.hosts.find(host);
  if (h == world_.hosts.end()) return Status::NotFound("no host '" + host + "'");
  // What an agent may send: it samples once a second at most (allot-agent refuses a shorter
  // --telemetry-interval), each GPU once a round. Whoever holds a host's credential may send
  // anything, and every sample taken in costs allotd memory, a row in telemetry.db and work on
  // its I/O thread for every minute of the span it covers: rounds with another interval, with a
  // GPU twice, or beyond two rounds a second are refused whole. The pace is kept by the rounds'
  // arrival here, the one clock a host cannot set, as a generic cell rate: each round moves the
  // host's due time half a second on, and one that finds it more than kRoundBurst - 1 rounds
  // ahead of now is refused. So a few rounds may come at once: an agent's that waited in its
  // socket while allotd was busy are not lost, and a flood still gets two rounds a second.
  constexpr int64_t kMinIntervalMs = 1000;
  constexpr int64_t kMaxIntervalMs = 3'600'000;
  constexpr TimeMs kRoundSpacingMs = kMinIntervalMs / 2;
  constexpr TimeMs kRoundBurst = 4;
  if (t.intervalMs < kMinIntervalMs || t.intervalMs > kMaxIntervalMs)
    return Status::InvalidArgument("telemetry: interval_ms " + std::to_string(t.intervalMs) +
                                   " is not from 1 s to 1 h");
  const TimeMs now = clock_.nowMs();
  std::set<int> seen;
  for (const auto& s : t.gpus) {
    bool known = std::any_of(h->second.gpus.begin(), h->second.gpus.end(),
                             [&](const model::Gpu& g) { return g.index == s.index; });
    if (!known) {
      return Status::InvalidArgument("telemetry for GPU " + std::to_string(s.index) +
                                     ", which host '" + host + "' does not have");
    }
    if (!seen.insert(s.index).second)
      return Status::InvalidArgument("telemetry names GPU " + std::to_string(s.index) + " twice");
  }
  TimeMs& due = telemetryDue_[host];
  const TimeMs from = std::max(due, now);
  if (from - now > (kRoundBurst - 1) * kRoundSpacingMs)
    return Status::FailedPrecondition("telemetry from host '" + host +
                                      "' comes more often than twice a second");
  due = from + kRoundSpacingMs;
  auto& mine = world_.telemetry[host];
  for (const auto& s : t.gpus) mine[s.index] = GpuTelemetry{s, t.at, now, t.intervalMs};
  accounting_.sampleRound(host, t, now);
  idle_.samplesArrived(host);
  return Status::Ok();
}

void Cluster::agentDisconnected(const std::string& host, AgentLink* link) {
  auto it = links_.find(host);
  if (it == links_.end() || it->second != link) return;  // a newer connection replaced it
  links_.erase(it);
  auto& h = world_.hosts.at(host);
  if (h.state == model::HostState::kOnline) {
    h.state = model::HostState::kUnreachable;
    // A link that did not stay up leaves the outage it interrupted running.
    LinkHistory& lh = linkHistory_[host];
    lh.disconnectedAt = clock_.nowMs();
    // Dropped before it was stable: the host flaps, and its outage goes on while it is connected.
    if (lh.awaySince != 0 &&
        lh.disconnectedAt - lh.connectedAt < kStableLinkHeartbeats * options_.heartbeatMs)
      lh.flapped = true;
    h.unreachableSince = lh.awaySince != 0 ? lh.awaySince : lh.disconnectedAt;
    spdlog::warn("host unreachable: host={} (agent disconnected)", host);
  }
}

Change<int> Cluster::checkLiveness() {
  Change<int> c;
  c.value = 0;
  auto now = clock_.nowMs();
  for (auto& [name, h] : world_.hosts) {
    if (h.state == model::HostState::kOnline && now - h.lastSeenAt > 3 * options_.heartbeatMs) {
      h.state = model::HostState::kUnreachable;
      LinkHistory& lh = linkHistory_[name];
      lh.disconnectedAt = now;
      h.unreachableSince = lh.awaySince != 0 ? lh.awaySince : now;
      spdlog::warn("host unreachable: host={} (no heartbeat for {} ms)", name, now - h.lastSeenAt);
    }
    TimeMs downSince = 0;
    if (h.state == model::HostState::kUnreachable) {
      if (h.unreachableSince == 0) h.unreachableSince = now;  // loaded from the store
      downSince = h.unreachableSince;
    } else if (auto lh = linkHistory_.find(name);
               lh != linkHistory_.end() && lh->second.awaySince != 0) {
      if (now - lh->second.connectedAt >= kStableLinkHeartbeats * options_.heartbeatMs) {
        lh->second.awaySince = 0;  // the link stayed up: the outage is over
        lh->second.flapped = false;
      } else if (lh->second.flapped) {
        downSince = lh->second.awaySince;  // flapping: still counted as away
      }
    }
    if (downSince == 0 || now - downSince < options_.lostAfterMs) continue;
    auto hj = world_.hostJobsOf(name);
    // A flapping host is connected now: it hears that its jobs are gone and stops them.
    if (!hj.empty() && h.state == model::HostState::kOnline) c.pushHosts.insert(name);
    for (int64_t id : hj) {
      Job& j = world_.job(id);
      if (j.evicting && !j.cancelRequested) {
        // It was leaving anyway: requeue it (or end it as preempted) as if it had stopped.
        for (const auto& h : model::rankHosts(j)) c.pushHosts.insert(h);
        const auto held = world_.ledger.openPlacement(id);
        preemptedJobStopped(j, "its host " + name + " became unreachable", c.batch);
        accounting_.correctEnd(id, held, name, h.lastSeenAt, "host " + name + " last seen",
                               c.batch);
        ++c.value;
        continue;
      }
      std::string why = "host " + name +
                        (h.state == model::HostState::kOnline ? " flapping (its agent reconnects "
                                                                "without staying up) for more than "
                                                              : " unreachable for more than ") +
                        std::to_string(options_.lostAfterMs / 1000) + "s";
      if (isGang(j)) {
        // The whole gang is lost with one of its hosts; the other agents stop their ranks when
        // the job leaves their desired state.
        const int rank = model::rankOn(j, name);
        j.failedRank = rank;
        j.ranks[rank].state = RankState::kLost;
        j.ranks[rank].message = "lost: " + why;
        why = "rank " + std::to_string(rank) + " on " + name + " lost: " + why;
        for (const auto& h : model::rankHosts(j)) c.pushHosts.insert(h);
      }
      // Its GPUs on this host were last known held when the host was last heard from.
      const auto held = world_.ledger.openPlacement(id);
      finishJob(j, JobState::kLost, why, c.batch);
      accounting_.correctEnd(id, held, name, h.lastSeenAt, "host " + name + " last seen", c.batch);
      ++c.value;
    }
  }
  return c;
}

}  // namespace allot::control
