#include "control/cluster.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <tuple>
#include <unordered_set>

#include "common/secrets.h"
#include "common/utf8.h"
#include "control/authz.h"
#include "model/resource_limits.h"

namespace allot::control {

using model::Job;
using model::JobState;

namespace {

constexpr size_t kMaxCommandArgs = 4096;
// What a job's command and its environment may take, each (their bytes, separators included):
// far above any real command line (Linux allows 128 KiB per argument) and environment, and small
// enough that no member can fill a host's desired state with a few jobs.
constexpr size_t kMaxCommandBytes = 256 << 10;
constexpr size_t kMaxEnvBytes = 256 << 10;

}  // namespace

Status validateName(const std::string& value, const char* field) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string(field) + ": " + why, field);
  };
  if (value.empty()) return bad("must not be empty");
  if (value.size() > 63) return bad("must be at most 63 characters");
  if (!std::isalnum(static_cast<unsigned char>(value[0])) ||
      std::isupper(static_cast<unsigned char>(value[0])))
    return bad("'" + value + "' must start with a lowercase letter or digit");
  for (char c : value) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!ok) return bad("'" + value + "' may contain only a-z, 0-9, '-', '_' and '.'");
  }
  return Status::Ok();
}

Status validateGpuModel(const std::string& value, const std::string& field) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(field + ": " + why, field);
  };
  if (value.empty()) return bad("a GPU model must not be empty");
  if (value.size() > 128) return bad("a GPU model is at most 128 characters");
  if (value == "any") return bad("'any' is not a GPU model");
  if (value.front() == ' ' || value.back() == ' ')
    return bad("GPU model '" + value + "' must not start or end with a space");
  for (char c : value) {
    if (c < 0x20 || c > 0x7e || c == ',' || c == '=')
      return bad("GPU model '" + value +
                 "' may contain only printable ASCII other than ',' and '='");
  }
  return Status::Ok();
}

Cluster::Cluster(const Clock& clock, LogStore& logs, ClusterOptions options)
    : clock_(clock),
      logs_(logs),
      options_(options),
      usage_(options.idleBelowPct),
      idleEpoch_(clock.nowMs()) {}

void Cluster::load(const store::Contents& contents) {
  world_.load(contents);
  // Documents written before contours belong to the default contour; they are written with it
  // the next time they change. A contour dropped from the config keeps its hosts and jobs
  // (they wait) until an admin moves them.
  const std::string& fallback = options_.contours.defaultContour;
  for (auto& [name, h] : world_.hosts) {
    if (h.contour.empty()) h.contour = fallback;
    if (!options_.contours.find(h.contour))
      spdlog::warn("host {} is in contour '{}', which is not configured; it takes no work", name,
                   h.contour);
  }
  for (auto& [id, j] : world_.jobs) {
    if (j.contour.empty()) j.contour = fallback;
    noteLocalHome(j);
  }
  // Capped logs of jobs that ended while allotd was down get their tails now.
  for (auto [job, rank] : logs_.unsealedAtStart()) {
    auto it = world_.jobs.find(job);
    if (it == world_.jobs.end() || model::isTerminal(it->second.state)) logs_.seal(job, rank);
  }
  // Samples may still come for allocations open now or closed moments ago; the attributor needs
  // their holds, not the whole history.
  const TimeMs recent = clock_.nowMs() - 10 * 60'000;
  std::unordered_set<int64_t> live;
  for (const auto& i : world_.ledger.intervals()) {
    if (i.end == 0 || i.end >= recent) live.insert(i.openSeq);
  }
  for (const auto& e : contents.ledger) {
    if (live.count(e.kind == model::LedgerKind::kOpen ? e.seq : e.ref)) usage_.onLedger(e);
  }
  idleEpoch_ = clock_.nowMs();
}

std::string Cluster::newSecretId(const char* kind) {
  return std::string(kind) + "-" + std::to_string(world_.nextSecretSeq++);
}

// ---- Teams, users, projects -------------------------------------------------------------

Result<Change<model::Team>> Cluster::createTeam(const Principal& p, const std::string& name) {
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "create teams"));
  ALLOT_RETURN_IF_ERROR(validateName(name, "name"));
  if (world_.teams.count(name)) return Status::AlreadyExists("team '" + name + "' already exists");
  Change<model::Team> c;
  c.value.name = name;
  c.value.createdAt = clock_.nowMs();
  ALLOT_RETURN_IF_ERROR(assignTeamGid(c.value, c.batch));
  world_.teams[name] = c.value;
  c.batch.add(store::PutTeam{c.value});
  return c;
}

std::vector<model::Team> Cluster::listTeams(const Principal& p) const {
  std::vector<model::Team> out;
  for (const auto& [name, t] : world_.teams) {
    if (authz::canSeeTeam(p, name)) out.push_back(t);
  }
  return out;
}

Result<Change<model::Project>> Cluster::createProject(const Principal& p, const std::string& name,
                                                      const std::string& teamIn) {
  std::string team = teamIn.empty() ? p.soleTeam() : teamIn;
  if (team.empty()) return Status::InvalidArgument(teamRequired(p), "team");
  ALLOT_RETURN_IF_ERROR(validateName(name, "name"));
  if (!world_.teams.count(team) || !authz::canSeeTeam(p, team))
    return Status::NotFound("no team '" + team + "'");
  ALLOT_RETURN_IF_ERROR(authz::canManageTeam(p, team));
  auto key = World::projectKey(team, name);
  if (world_.projects.count(key))
    return Status::AlreadyExists("project '" + name + "' already exists in team '" + team + "'");
  Change<model::Project> c;
  c.value.name = name;
  c.value.team = team;
  c.value.createdAt = clock_.nowMs();
  world_.projects[key] = c.value;
  c.batch.add(store::PutProject{c.value});
  return c;
}

std::vector<model::Project> Cluster::listProjects(const Principal& p) const {
  std::vector<model::Project> out;
  for (const auto& [key, pr] : world_.projects) {
    if (authz::canSeeTeam(p, pr.team)) out.push_back(pr);
  }
  return out;
}

// ---- Hosts -------------------------------------------------------------------------------

Result<Change<CreatedJoinToken>> Cluster::createJoinToken(const Principal& p, int64_t ttlMs,
                                                          int uses) {
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "create join tokens"));
  if (ttlMs <= 0) return Status::InvalidArgument("ttl: must be positive", "ttl");
  if (uses < 1 || uses > kMaxJoinTokenUses)
    return Status::InvalidArgument("uses: must be from 1 to " + std::to_string(kMaxJoinTokenUses),
                                   "uses");
  Change<CreatedJoinToken> c;
  auto now = clock_.nowMs();
  c.value.token = model::JoinToken{newSecretId("join"), "", p.name, now, now + ttlMs, uses};
  c.value.secret = newToken(c.value.token.id);
  c.value.token.hash = hashToken(c.value.secret);
  world_.joinTokens[c.value.token.id] = c.value.token;
  c.batch.add(store::PutJoinToken{c.value.token});
  return c;
}

Result<std::vector<model::JoinToken>> Cluster::listJoinTokens(const Principal& p) const {
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "list join tokens"));
  std::vector<model::JoinToken> out;
  for (const auto& [id, t] : world_.joinTokens) out.push_back(t);
  return out;
}

Result<Change<model::JoinToken>> Cluster::revokeJoinToken(const Principal& p,
                                                          const std::string& id) {
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "revoke join tokens"));
  auto it = world_.joinTokens.find(id);
  if (it == world_.joinTokens.end()) return Status::NotFound("no join token '" + id + "'");
  Change<model::JoinToken> c;
  // Revoking twice keeps the first time: the record says when it stopped working.
  if (it->second.revokedAt == 0) {
    it->second.revokedAt = clock_.nowMs();
    c.batch.add(store::PutJoinToken{it->second});
    spdlog::info("join token revoked: id={} by={}", id, p.name);
  }
  c.value = it->second;
  return c;
}

Result<Change<JoinedHost>> Cluster::joinHost(std::string_view secret, const std::string& nameIn,
                                             const model::Inventory& inv) {
  auto sep = secret.find('_');
  auto it = sep == std::string_view::npos
                ? world_.joinTokens.end()
                : world_.joinTokens.find(std::string(secret.substr(0, sep)));
  if (it == world_.joinTokens.end() || !hashesEqual(it->second.hash, hashToken(secret)))
    return Status::Unauthenticated("join_token: unknown join token");
  model::JoinToken& token = it->second;
  if (token.revokedAt != 0)
    return Status::Unauthenticated("join_token: the join token was revoked");
  if (token.expiresAt <= clock_.nowMs())
    return Status::Unauthenticated(
        "join_token: the join token has expired; make a new one with `allot host join-token`");
  if (token.usesLeft() <= 0)
    return Status::Unauthenticated(
        "join_token: the join token has been used up; make a new one with `allot host "
        "join-token`");
  std::string name = nameIn.empty() ? inv.hostname : nameIn;
  ALLOT_RETURN_IF_ERROR(validateName(name, "name"));
  auto existing = world_.hosts.find(name);
  if (existing != world_.hosts.end() && !existing->second.credentialReset) {
    // Whoever holds a join token could otherwise take over a running host's identity (and the
    // work placed on it). A reinstalled host needs an admin's word first.
    return Status::AlreadyExists("name: host '" + name +
                                 "' has already joined; a platform admin must reset its "
                                 "credential (`allot host reset-credential " +
                                 name + "`) before it can join again");
  }
  Change<JoinedHost> c;
  auto now = clock_.nowMs();
  model::Host h;
  if (existing != world_.hosts.end()) {
    // Re-joining after a reset (a reinstalled host, a lost credential): the host keeps its name
    // and history. Its old credentials were revoked by the reset.
    h = existing->second;
    h.credentialReset = false;
    revokeHostCredentials(name, c.batch);
  } else {
    h.name = name;
    h.joinedAt = now;
    h.contour = options_.contours.defaultContour;
    // A new host takes work once commissioning has checked it (cluster_host_task.cc).
    if (options_.lifecycle.commission) h.adminState = model::AdminState::kRegistering;
  }
  model::applyInventory(h, inv);
  world_.hosts[name] = h;
  c.value.credential =
      mintToken({"", "host:" + name, "", now, 0, "", model::TokenKind::kHost}, "hst", c.batch)
          .secret;
  // The use is counted in the same commit as the host: no restart or concurrent join can admit
  // more hosts than the token allows.
  ++token.used;
  c.value.host = h;
  c.batch.add(store::PutHost{h}).add(store::PutJoinToken{token});
  spdlog::info("host joined: host={} gpus={} provider={}{} join_token={} uses_left={}", name,
               h.gpus.size(), h.gpuProvider, h.simulated ? " (SIMULATED)" : "", token.id,
               token.usesLeft());
  return c;
}

void Cluster::revokeHostCredentials(const std::string& host, store::WriteBatch& batch) {
  for (auto t = world_.tokens.begin(); t != world_.tokens.end();) {
    if (t->second.owner == "host:" + host) {
      batch.add(store::DeleteToken{t->first});
      t = world_.tokens.erase(t);
    } else {
      ++t;
    }
  }
}

Result<Change<model::Host>> Cluster::resetHostCredential(const Principal& p,
                                                         const std::string& name) {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "reset a host's credential"));
  Change<model::Host> c;
  revokeHostCredentials(name, c.batch);
  it->second.credentialReset = true;
  c.batch.add(store::PutHost{it->second});
  c.value = it->second;
  spdlog::warn("host credential reset: host={} by={}; its agent must join again", name, p.name);
  return c;
}

std::vector<model::Host> Cluster::listHosts(const Principal& p) const {
  std::vector<model::Host> out;
  for (const auto& [name, h] : world_.hosts) {
    if (authz::canSeeHost(p, h)) out.push_back(authz::visibleHost(p, h));
  }
  return out;
}

Result<model::Host> Cluster::getHost(const Principal& p, const std::string& name) const {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  return authz::visibleHost(p, it->second);
}

std::vector<GpuAllocation> Cluster::allocations(const Principal& p, const std::string& host) const {
  std::vector<GpuAllocation> out;
  auto h = world_.hosts.find(host);
  auto it = world_.gpuHolders.find(host);
  if (h == world_.hosts.end() || it == world_.gpuHolders.end()) return out;
  if (!authz::canSeeHost(p, h->second)) return out;
  for (const auto& [gpu, jobId] : it->second) {
    auto g = std::find_if(h->second.gpus.begin(), h->second.gpus.end(),
                          [&](const model::Gpu& x) { return x.index == gpu; });
    if (g != h->second.gpus.end() && !authz::canSeeGpu(p, *g)) continue;
    const auto& j = world_.jobs.at(jobId);
    out.push_back({gpu, jobId, j.team, j.user, j.project, j.startedAt ? j.startedAt : j.scheduledAt,
                   j.gpuMilli});
  }
  return out;
}

// ---- Jobs --------------------------------------------------------------------------------

Result<Change<Job>> Cluster::submitJob(const Principal& p, JobRequest r) {
  if (!p.isUser()) return Status::PermissionDenied("hosts cannot submit jobs");
  std::string team = r.team.empty() ? p.soleTeam() : r.team;
  if (team.empty()) return Status::InvalidArgument(teamRequired(p), "team");
  ALLOT_RETURN_IF_ERROR(authz::canSubmitTo(p, team));
  if (!world_.teams.count(team)) return Status::NotFound("no team '" + team + "'");
  if (r.command.empty() || r.command[0].empty())
    return Status::InvalidArgument("command: must name a program to run", "command");
  if (r.command.size() > kMaxCommandArgs)
    return Status::InvalidArgument("command: too many arguments", "command");
  size_t commandBytes = 0, envBytes = 0;
  for (const auto& a : r.command) commandBytes += a.size() + 1;
  for (const auto& [k, v] : r.env) envBytes += k.size() + v.size() + 2;
  for (auto [field, bytes, limit] : {std::tuple{"command", commandBytes, kMaxCommandBytes},
                                     std::tuple{"env", envBytes, kMaxEnvBytes}}) {
    if (bytes > limit)
      return Status::InvalidArgument(std::string(field) + ": " + std::to_string(bytes) +
                                         " bytes, over the limit of " + std::to_string(limit) +
                                         "; pass large inputs in a file",
                                     field);
  }
  if (r.gpus < 0 || r.gpus > model::kMaxRequestGpus)
    return Status::InvalidArgument(
        "gpus: must be between 0 and " + std::to_string(model::kMaxRequestGpus), "gpus");
  ALLOT_RETURN_IF_ERROR(checkSchedulingFields(r));
  if (r.contour.empty()) r.contour = options_.contours.defaultContour;
  ALLOT_RETURN_IF_ERROR(options_.contours.check(r.contour, "contour"));
  ALLOT_RETURN_IF_ERROR(authz::canSubmitToContour(p, team, *options_.contours.find(r.contour)));
  if (!r.name.empty()) ALLOT_RETURN_IF_ERROR(validateName(r.name, "name"));
  if (!r.project.empty() && !world_.projects.count(World::projectKey(team, r.project)))
    return Status::NotFound("no project '" + r.project + "' in team '" + team + "'");
  for (const auto& [k, v] : r.env) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos)
      return Status::InvalidArgument("env: bad variable name '" + k + "'", "env");
    // ALLOT_SIM_GPU_UTIL is the one the user sets: the utilisation a job declares to a simulated
    // host (docs/agent.md); real hosts ignore it.
    const bool reserved = (k.rfind("ALLOT_", 0) == 0 && k != "ALLOT_SIM_GPU_UTIL") ||
                          k == "CUDA_VISIBLE_DEVICES" || k == "NVIDIA_VISIBLE_DEVICES";
    if (reserved)
      return Status::InvalidArgument("env: '" + k + "' is set by Allot and cannot be overridden",
                                     "env");
  }
  ALLOT_RETURN_IF_ERROR(
      checkJobLimits(p.name, team, static_cast<int64_t>(commandBytes + envBytes)));
  Change<Job> c;
  Job& j = c.value;
  j.id = world_.nextJobId++;
  j.name = r.name.empty() ? std::string(r.command[0].substr(r.command[0].rfind('/') + 1)) : r.name;
  // Cut at a character boundary: a name cut inside one is not UTF-8, and the store takes only
  // UTF-8.
  j.name = cutUtf8(j.name, 63);
  j.team = team;
  j.project = r.project;
  j.user = p.name;
  j.command = std::move(r.command);
  j.env = std::move(r.env);
  j.gpus = r.gpus;
  j.gpuModels = std::move(r.gpuModels);
  j.gpuMilli = r.gpuMilli;
  j.gpuMemoryMib = r.gpuMemoryMib;
  j.cpuMillis = r.cpuMillis;
  j.memoryMib = r.memoryMib;
  j.priority = r.priority;
  j.preemptible = r.preemptible;
  j.wholeHost = r.wholeHost;
  j.hosts = r.hosts;
  j.maxRuntimeMs = r.maxRuntimeMs;
  j.minDriver = std::move(r.minDriver);
  j.minCuda = std::move(r.minCuda);
  j.contour = std::move(r.contour);
  j.session = std::move(r.session);
  j.state = JobState::kQueued;
  j.reason = "waiting for the scheduler";
  j.submittedAt = clock_.nowMs();
  world_.jobs[j.id] = j;
  world_.onJobChanged(nullptr, j);
  c.batch.add(store::PutJob{j});
  if (onQueueChanged_) onQueueChanged_();
  return c;
}

Status Cluster::checkJobLimits(const std::string& user, const std::string& team,
                               int64_t bytes) const {
  const JobLimits& l = options_.limits;
  auto active = [](const std::map<std::string, World::Active>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? World::Active{} : it->second;
  };
  const World::Active mine = active(world_.activeByUser, user);
  const World::Active ours = active(world_.activeByTeam, team);
  auto refuse = [](const std::string& who, const std::string& what, const char* key) {
    return Status::FailedPrecondition(who + " already has " + what +
                                      " in jobs queued or running, the most allowed (limits." +
                                      key + "); wait for some to end, or cancel some");
  };
  if (l.maxActiveJobsPerUser > 0 && mine.jobs >= l.maxActiveJobsPerUser)
    return refuse("user " + user, std::to_string(mine.jobs) + " jobs", "max_active_jobs_per_user");
  if (l.maxActiveJobsPerTeam > 0 && ours.jobs >= l.maxActiveJobsPerTeam)
    return refuse("team " + team, std::to_string(ours.jobs) + " jobs", "max_active_jobs_per_team");
  auto mib = [](int64_t b) { return std::to_string(b >> 20) + " MiB"; };
  if (l.maxActiveJobBytesPerUser > 0 && mine.specBytes + bytes > l.maxActiveJobBytesPerUser)
    return refuse("user " + user,
                  mib(mine.specBytes) + " of commands and environments (this job adds " +
                      std::to_string(bytes) + " bytes)",
                  "max_active_job_mib_per_user");
  if (l.maxActiveJobBytesPerTeam > 0 && ours.specBytes + bytes > l.maxActiveJobBytesPerTeam)
    return refuse("team " + team, mib(ours.specBytes) + " of commands and environments",
                  "max_active_job_mib_per_team");
  return Status::Ok();
}

void Cluster::visitJobs(const Principal& p, const JobFilter& f,
                        const std::function<void(const Job&)>& fn) const {
  size_t seen = 0;
  for (auto it = world_.jobs.rbegin(); it != world_.jobs.rend() && seen < f.limit; ++it) {
    const Job& j = it->second;
    if (!authz::canSeeJob(p, j)) continue;
    if (f.state && j.state != *f.state) continue;
    if (!f.team.empty() && j.team != f.team) continue;
    if (f.submittedSince != 0 && j.submittedAt < f.submittedSince) continue;
    if (f.submittedUntil != 0 && j.submittedAt >= f.submittedUntil) continue;
    ++seen;
    if (j.state == JobState::kQueued) {
      Job withReason = j;
      withReason.reason = waitReason(j);
      fn(withReason);
    } else {
      fn(j);
    }
  }
}

std::vector<Job> Cluster::listJobs(const Principal& p, const JobFilter& f) const {
  std::vector<Job> out;
  visitJobs(p, f, [&](const Job& j) { out.push_back(j); });
  return out;
}

Result<Job> Cluster::getJob(const Principal& p, int64_t id) const {
  auto it = world_.jobs.find(id);
  if (it == world_.jobs.end() || !authz::canSeeJob(p, it->second))
    return Status::NotFound("no job " + std::to_string(id));
  Job j = it->second;
  if (j.state == JobState::kQueued) j.reason = waitReason(j);
  return j;
}

void Cluster::updateJob(Job& job, const Job& before, store::WriteBatch& batch) {
  recordLedger(before, job, batch);
  world_.onJobChanged(&before, job);
  batch.add(store::PutJob{job});
}

void Cluster::finishJob(Job& job, JobState state, std::string reason, store::WriteBatch& batch) {
  Job before = job;
  job.state = state;
  job.reason = std::move(reason);
  if (job.finishedAt == 0) job.finishedAt = clock_.nowMs();
  sessionRuntime_.erase(job.id);
  sessionProxiedAt_.erase(job.id);
  // Its output is all in (agents send it before the status that ends a job): close its logs.
  for (int rank = 0; rank < std::max<int>(1, static_cast<int>(job.ranks.size())); ++rank)
    logs_.seal(job.id, rank);
  updateJob(job, before, batch);
  if (onQueueChanged_) onQueueChanged_();  // GPUs came free
}

Result<Change<Job>> Cluster::cancelJob(const Principal& p, int64_t id) {
  auto it = world_.jobs.find(id);
  if (it == world_.jobs.end() || !authz::canSeeJob(p, it->second))
    return Status::NotFound("no job " + std::to_string(id));
  ALLOT_RETURN_IF_ERROR(authz::canCancelJob(p, it->second));
  Job& j = it->second;
  Change<Job> c;
  if (model::isTerminal(j.state)) {
    return Status::FailedPrecondition("job " + std::to_string(id) + " has already ended (" +
                                      model::jobStateName(j.state) + ")");
  }
  if (j.state == JobState::kQueued) {
    j.cancelRequested = true;
    finishJob(j, JobState::kCancelled, "cancelled by " + p.name + " while queued", c.batch);
  } else if (!j.cancelRequested) {
    // Placed: the agent stops the process tree; the job ends when the agent says it has.
    Job before = j;
    j.cancelRequested = true;
    j.reason = "cancel requested by " + p.name;
    updateJob(j, before, c.batch);
    for (const auto& h : model::rankHosts(j)) c.pushHosts.insert(h);
  }
  c.value = j;
  return c;
}

}  // namespace allot::control
