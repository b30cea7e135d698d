#include "control/cluster.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <tuple>

#include "common/secrets.h"
#include "common/utf8.h"
#include "common/version.h"
#include "control/authz.h"
#include "control/fleet_fit.h"
#include "control/images/image_policy.h"
#include "model/image_ref.h"
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

// What a service calls when the queue may move: the Server's wake-up, set after construction.
std::function<void()> waker(const std::function<void()>& onQueueChanged) {
  return [&onQueueChanged] {
    if (onQueueChanged) onQueueChanged();
  };
}

}  // namespace

Cluster::Cluster(const Clock& clock, LogStore& logs, ClusterOptions options)
    : clock_(clock),
      logs_(logs),
      options_(options),
      access_(clock_, world_, options_.unixIds, sessions_, options_.teamAdminsCreateUsers),
      quotas_(world_, options_.contours, waker(onQueueChanged_)),
      hosts_({clock_, world_, access_, *this, waker(onQueueChanged_)},
             {options_.lifecycle, options_.hookProfiles, options_.contours}),
      leases_({clock_, world_, events_, hosts_, waker(onQueueChanged_)}, options_.leases,
              options_.cancelGraceMs),
      accounting_(clock_, world_, options_.idleBelowPct),
      idle_({clock_, world_, events_, sessions_, *this, *this},
            {options_.idleDefault, options_.webhookAllow}) {}

void Cluster::load(const store::Contents& contents) {
  world_.load(contents);
  events_.load(contents.events);
  profiles_.load(contents.profiles);
  leases_.load(contents.leases);
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
    sessions_.started(j);
  }
  // Capped logs of jobs that ended while allotd was down get their tails now.
  for (auto [job, rank] : logs_.unsealedAtStart()) {
    auto it = world_.jobs.find(job);
    if (it == world_.jobs.end() || model::isTerminal(it->second.state)) logs_.seal(job, rank);
  }
  // Samples may still come for allocations open now or closed moments ago.
  accounting_.load(contents);
  idle_.restarted();
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
  if (r.resources.gpus < 0 || r.resources.gpus > model::kMaxRequestGpus)
    return Status::InvalidArgument(
        "gpus: must be between 0 and " + std::to_string(model::kMaxRequestGpus), "gpus");
  ALLOT_RETURN_IF_ERROR(checkSchedulingFields(r));
  if (r.contour.empty()) r.contour = options_.contours.defaultContour;
  ALLOT_RETURN_IF_ERROR(options_.contours.check(r.contour, "contour"));
  ALLOT_RETURN_IF_ERROR(authz::canSubmitToContour(p, team, *options_.contours.find(r.contour)));
  // The image first: what the team may not use is refused as that, whatever the fleet holds.
  // No image named: the team's default, if it has one; "host" asks for the host regardless.
  std::string image;
  const std::string& asked = r.image.empty() ? world_.teams.at(team).defaultImage : r.image;
  if (!asked.empty() && asked != kOnTheHost) {
    auto ref = model::parseImageRef(asked);
    if (!ref.ok()) return ref.status();  // names "image"
    ALLOT_RETURN_IF_ERROR(checkImageAllowed(team, world_.teams.at(team).imageAllow, *ref));
    image = ref->str();
  }
  // What the image declares it needs of the driver, when a host that holds it has said.
  // Only for work with GPUs, as the NVIDIA container toolkit checks it.
  const std::string imageMinCuda =
      image.empty() || r.resources.gpus == 0 ? "" : imageCache_.knownMinCuda(image, team);
  if (!imageMinCuda.empty() && !versionAtLeast(r.resources.minCuda, imageMinCuda))
    r.resources.minCuda = imageMinCuda;
  if (!r.queueAnyway) {
    Status fit = checkFleetCanRun({world_.hosts, world_.teams, options_.contours.defaultContour},
                                  team, r.contour, r.resources, !image.empty());
    // A session cannot be queued anyway: it is for now, and its request is its profile's.
    if (!fit.ok() && !r.session)
      return Status::InvalidArgument(fit.message() +
                                         "; to queue it for hosts yet to join, submit with "
                                         "--queue-anyway (queue_anyway: true)",
                                     fit.field());
    ALLOT_RETURN_IF_ERROR(fit);
  }
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
  ALLOT_RETURN_IF_ERROR(checkDependencies(p, r.dependencies));
  ALLOT_RETURN_IF_ERROR(checkWorkdir(r.workdir));
  const int tasks = r.array ? static_cast<int>(r.array->indices.size()) : 1;
  if (r.array) ALLOT_RETURN_IF_ERROR(checkArray(*r.array, r.session.has_value()));
  ALLOT_RETURN_IF_ERROR(
      checkJobLimits(p.name, team, static_cast<int64_t>(commandBytes + envBytes) * tasks, tasks));
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
  j.resources = std::move(r.resources);
  j.priority = r.priority;
  j.preemptible = r.preemptible;
  j.maxRuntimeMs = r.maxRuntimeMs;
  j.contour = std::move(r.contour);
  j.session = std::move(r.session);
  j.dependencies = std::move(r.dependencies);
  j.workdir = std::move(r.workdir);
  j.image = std::move(image);
  j.imageMinCuda = imageMinCuda;
  j.state = JobState::kQueued;
  j.reason = "waiting for the scheduler";
  j.submittedAt = clock_.nowMs();
  if (r.array) {
    // One job per index, ids in a row from the first, which names the array: what Slurm users
    // know as ARRAY_JOB_ID and ARRAY_TASK_ID.
    j.arrayId = j.id;
    j.arrayLimit = r.array->limit;
    world_.nextJobId += tasks - 1;
  }
  for (int t = 0; t < tasks; ++t) {
    // Built in place at the end of the jobs (ids only grow), then copied once for the store: a
    // submission's cost is mostly copies of its job.
    Job& task = world_.jobs.emplace_hint(world_.jobs.end(), j.id + t, j)->second;
    task.id = j.id + t;
    if (r.array) task.arrayIndex = r.array->indices[t];
    world_.onJobChanged(nullptr, task);
    c.batch.add(store::PutJob{task});
  }
  if (r.array) j.arrayIndex = r.array->indices.front();
  if (onQueueChanged_) onQueueChanged_();
  return c;
}

Status Cluster::checkWorkdir(const std::string& dir) {
  if (dir.empty()) return Status::Ok();
  // Entered by the job itself, as its owner, after it dropped root (allot-job-shim): the path
  // reaches only what its owner may reach, so only its form is checked here.
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument("workdir: " + why, "workdir");
  };
  if (dir.front() != '/') return bad("must be an absolute path on the hosts, got '" + dir + "'");
  if (dir.size() > kMaxWorkdirBytes)
    return bad("longer than " + std::to_string(kMaxWorkdirBytes) + " bytes");
  for (unsigned char ch : dir) {
    if (ch < 0x20 || ch == 0x7f) return bad("holds a control character");
  }
  if (!isValidUtf8(dir)) return bad("is not UTF-8");
  // Clean, as the CLI sends it: what is shown is the directory the job starts in.
  for (size_t at = 0; at != std::string::npos;) {
    const size_t next = dir.find('/', at + 1);
    const std::string_view part = std::string_view(dir).substr(at + 1, next - at - 1);
    if (part == "." || part == ".." || (part.empty() && next != std::string::npos))
      return bad("must be a clean path (no '.', '..' or '//'), got '" + dir + "'");
    at = next;
  }
  return Status::Ok();
}

Status Cluster::checkArray(const JobRequest::Array& a, bool session) {
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument("array: " + why, "array");
  };
  if (session) return bad("a session cannot be an array");
  if (a.indices.empty()) return bad("names no index");
  if (a.indices.size() > static_cast<size_t>(kMaxArrayTasks))
    return bad(std::to_string(a.indices.size()) + " tasks, more than the " +
               std::to_string(kMaxArrayTasks) + " an array may have");
  for (size_t i = 0; i < a.indices.size(); ++i) {
    if (a.indices[i] < 0 || a.indices[i] > kMaxArrayIndex)
      return bad("index " + std::to_string(a.indices[i]) + " is outside 0.." +
                 std::to_string(kMaxArrayIndex));
    if (i > 0 && a.indices[i] <= a.indices[i - 1]) return bad("indices must ascend, each once");
  }
  if (a.limit < 0) return bad("the limit after % must be positive");
  return Status::Ok();
}

Status Cluster::checkJobLimits(const std::string& user, const std::string& team, int64_t bytes,
                               int jobs) const {
  const JobLimits& l = options_.limits;
  auto active = [](const std::map<std::string, World::Active>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? World::Active{} : it->second;
  };
  const World::Active mine = active(world_.activeByUser(), user);
  const World::Active ours = active(world_.activeByTeam(), team);
  auto refuse = [](const std::string& who, const std::string& what, const char* key) {
    return Status::FailedPrecondition(who + " already has " + what +
                                      " in jobs queued or running, the most allowed (limits." +
                                      key + "); wait for some to end, or cancel some");
  };
  // An array's tasks count one by one: an array that does not fit is refused whole.
  const std::string adding = jobs > 1 ? " (this array adds " + std::to_string(jobs) + ")" : "";
  if (l.maxActiveJobsPerUser > 0 && mine.jobs + jobs > l.maxActiveJobsPerUser)
    return refuse("user " + user, std::to_string(mine.jobs) + " jobs" + adding,
                  "max_active_jobs_per_user");
  if (l.maxActiveJobsPerTeam > 0 && ours.jobs + jobs > l.maxActiveJobsPerTeam)
    return refuse("team " + team, std::to_string(ours.jobs) + " jobs" + adding,
                  "max_active_jobs_per_team");
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
    if (!f.states.empty() && !f.states.count(j.state)) continue;
    if (!f.user.empty() && j.user != f.user) continue;
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
  accounting_.jobChanged(before, job, batch);
  world_.onJobChanged(&before, job);
  batch.add(store::PutJob{job});
}

void Cluster::finishJob(Job& job, JobState state, std::string reason, store::WriteBatch& batch) {
  Job before = job;
  job.state = state;
  job.reason = std::move(reason);
  if (job.finishedAt == 0) job.finishedAt = clock_.nowMs();
  sessions_.ended(job.id);
  pulls_.erase(job.id);
  // Its output is all in (agents send it before the status that ends a job): close its logs.
  for (int rank = 0; rank < std::max<int>(1, static_cast<int>(job.ranks.size())); ++rank)
    logs_.seal(job.id, rank);
  updateJob(job, before, batch);
  if (onQueueChanged_) onQueueChanged_();  // GPUs came free
}

Result<Change<Job>> Cluster::cancelJob(const Principal& p, int64_t id) {
  auto found = jobToControl(p, id);
  if (!found.ok()) return found.status();
  Job& j = **found;
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
