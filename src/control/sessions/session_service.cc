// Interactive sessions (docs/sessions.md): a session is a job made from a profile, so the
// scheduler places it, the ledger accounts it and team isolation covers it like any job. What is
// its own: a name unique among its owner's live sessions, the app its agent starts, who may open
// it, and the runtime state (Jupyter's token, readiness, connections) its agent reports.

#include "control/sessions/session_service.h"

#include <algorithm>

#include "control/authz.h"
#include "control/names.h"

namespace allot::control {

using model::Job;
using model::JobState;

namespace {

Status noSession(int64_t id) { return Status::NotFound("no session " + std::to_string(id)); }

// What the agent starts for a profile's command: a Jupyter app it knows how to serve under
// /sessions/{id}/ (with a pre-imported fork server for Debian's own), or the command as it is.
std::string sessionApp(const std::vector<std::string>& command) {
  const std::string& program = command.front();
  const std::string base = program.substr(program.rfind('/') + 1);
  if (base == "jupyter-server" || base == "jupyter-notebook" || base == "jupyter-lab") return base;
  if (base == "jupyter" && command.size() > 1 &&
      (command[1] == "server" || command[1] == "notebook" || command[1] == "lab"))
    return "jupyter-" + command[1];
  return "command";
}

// A limit of 0 is no limit.
Status withinMaximum(int64_t value, int64_t maximum, const char* field) {
  if (maximum > 0 && value > maximum)
    return Status::InvalidArgument(std::string(field) + ": " + std::to_string(value) +
                                       " is over the profile's maximum of " +
                                       std::to_string(maximum),
                                   field);
  return Status::Ok();
}

// Decided at every request, on the caller's teams as they are now: someone who left the
// session's team (its owner included) reaches it no more.
bool isOwnerOrShared(const Principal& p, const Job& j) {
  if (!p.inTeam(j.team)) return false;
  return j.user == p.name ||
         (j.session && std::find(j.session->sharedWith.begin(), j.session->sharedWith.end(),
                                 p.name) != j.session->sharedWith.end());
}

}  // namespace

Result<Change<Job>> SessionService::create(const Principal& p, SessionRequest r) {
  if (!p.isUser()) return Status::PermissionDenied("hosts cannot start sessions");
  const std::string profileName = r.profile.empty() ? "jupyter" : r.profile;
  const model::Profile* found = profiles_.find(profileName);
  if (!found || !authz::canSeeProfile(p, *found))
    return Status::NotFound("no profile '" + profileName + "'", "profile");
  const model::Profile& profile = *found;

  const std::string team =
      r.team.empty() ? (profile.team.empty() ? p.soleTeam() : profile.team) : r.team;
  if (team.empty()) return Status::InvalidArgument(teamRequired(p), "team");
  // A team's profile serves that team; a platform-wide one the teams it is visible to.
  if (!profile.team.empty() && profile.team != team)
    return Status::InvalidArgument(
        "profile: '" + profileName + "' belongs to team '" + profile.team + "'", "profile");
  if (profile.team.empty() && !profile.visibleTo.empty() &&
      std::find(profile.visibleTo.begin(), profile.visibleTo.end(), team) ==
          profile.visibleTo.end())
    return Status::InvalidArgument(
        "profile: '" + profileName + "' is not offered to team '" + team + "'", "profile");

  JobRequest job;
  job.team = team;
  job.project = r.project;
  job.command = profile.command;
  job.image = profile.image;  // "": the team's default image, if it has one
  job.env = profile.env;
  job.resources.gpus = r.gpus.value_or(r.gpuMilli ? 1 : profile.defaults.gpus);
  job.resources.gpuMilli = r.gpuMilli.value_or(r.gpus ? 1000 : profile.defaults.gpuMilli);
  job.resources.cpuMillis = r.cpuMillis.value_or(profile.defaults.cpuMillis);
  job.resources.memoryMib = r.memoryMib.value_or(profile.defaults.memoryMib);
  if (job.resources.gpus < 0) return Status::InvalidArgument("gpus: must not be negative", "gpus");
  ALLOT_RETURN_IF_ERROR(withinMaximum(job.resources.gpus, profile.maxima.gpus, "gpus"));
  ALLOT_RETURN_IF_ERROR(
      withinMaximum(job.resources.cpuMillis, profile.maxima.cpuMillis, "cpu_millis"));
  ALLOT_RETURN_IF_ERROR(
      withinMaximum(job.resources.memoryMib, profile.maxima.memoryMib, "memory_mib"));
  job.maxRuntimeMs = profile.maxLifetimeMs;

  model::SessionSpec spec;
  spec.profile = profileName;
  spec.app = sessionApp(profile.command);
  spec.storage = r.storage.empty() ? profile.storage.front() : r.storage;
  if (std::find(profile.storage.begin(), profile.storage.end(), spec.storage) ==
      profile.storage.end()) {
    std::string allowed;
    for (const auto& s : profile.storage) allowed += (allowed.empty() ? "" : ", ") + s;
    return Status::InvalidArgument(
        "storage: profile '" + profileName + "' offers " + allowed + ", not '" + spec.storage + "'",
        "storage");
  }
  if (spec.storage == "shared" && sharedDir_.empty())
    return Status::InvalidArgument(
        "storage: this cluster has no shared storage (allotd --session-shared-dir)", "storage");
  spec.idleThresholdPct = profile.idleThresholdPct;
  spec.idleAfterMs = profile.idleAfterMs;

  // Names are the owner's handle on a session (`allot session open NAME`): unique among their
  // live sessions, numbered from the profile's name when none is given.
  auto taken = [&](const std::string& name) {
    for (const auto& [id, j] : world_.jobs) {
      if (j.session && j.user == p.name && j.name == name && !model::isTerminal(j.state))
        return true;
    }
    return false;
  };
  if (!r.name.empty()) {
    ALLOT_RETURN_IF_ERROR(validateName(r.name, "name"));
    if (taken(r.name))
      return Status::AlreadyExists("name: you already have a session named '" + r.name + "'");
    job.name = r.name;
  } else {
    job.name = profileName;
    for (int n = 2; taken(job.name); ++n) job.name = profileName + "-" + std::to_string(n);
  }
  job.session = std::move(spec);
  return jobs_.submitJob(p, std::move(job));
}

std::vector<Job> SessionService::list(const Principal& p, bool all, bool live) const {
  std::vector<Job> out;
  for (auto it = world_.jobs.rbegin(); it != world_.jobs.rend(); ++it) {
    const Job& j = it->second;
    if (!j.session || !authz::canSeeJob(p, j)) continue;
    if (!all && !isOwnerOrShared(p, j)) continue;
    if (live && model::isTerminal(j.state)) continue;
    out.push_back(j);
    if (j.state == JobState::kQueued) out.back().reason = jobs_.waitReason(j);
  }
  return out;
}

Result<Job> SessionService::get(const Principal& p, int64_t id) const {
  auto it = world_.jobs.find(id);
  if (it == world_.jobs.end() || !it->second.session || !authz::canSeeJob(p, it->second))
    return noSession(id);
  Job j = it->second;
  if (j.state == JobState::kQueued) j.reason = jobs_.waitReason(j);
  return j;
}

Result<Change<Job>> SessionService::stop(const Principal& p, int64_t id) {
  auto it = world_.jobs.find(id);
  if (it == world_.jobs.end() || !it->second.session || !authz::canSeeJob(p, it->second))
    return noSession(id);
  if (model::isTerminal(it->second.state))
    return Status::FailedPrecondition("session " + std::to_string(id) + " has already ended (" +
                                      model::jobStateName(it->second.state) + ")");
  return jobs_.cancelJob(p, id);
}

Result<Change<Job>> SessionService::share(const Principal& p, int64_t id,
                                          std::vector<std::string> users) {
  auto it = world_.jobs.find(id);
  if (it == world_.jobs.end() || !it->second.session || !authz::canSeeJob(p, it->second))
    return noSession(id);
  Job& j = it->second;
  if (j.user != p.name)
    return Status::PermissionDenied("only " + j.user + ", who owns session " + std::to_string(id) +
                                    ", may share it");
  std::sort(users.begin(), users.end());
  users.erase(std::unique(users.begin(), users.end()), users.end());
  for (const auto& u : users) {
    // Sharing stays inside the team: a user of another team is as unknown here as anywhere.
    auto uit = world_.users.find(u);
    if (uit == world_.users.end() || !uit->second.teams.count(j.team))
      return Status::NotFound("no user '" + u + "' in team '" + j.team + "'", "users");
  }
  Change<Job> c;
  Job before = j;
  j.session->sharedWith = std::move(users);
  jobs_.jobUpdated(j, before, c.batch);
  c.value = j;
  return c;
}

void SessionService::leftTeams(const model::User& u, store::WriteBatch& batch) {
  for (auto& [id, j] : world_.jobs) {
    if (!j.session || model::isTerminal(j.state) || u.teams.count(j.team)) continue;
    auto& shared = j.session->sharedWith;
    if (std::find(shared.begin(), shared.end(), u.name) == shared.end()) continue;
    Job before = j;
    std::erase(shared, u.name);
    jobs_.jobUpdated(j, before, batch);
  }
}

void SessionService::proxied(int64_t id) { proxiedAt_[id] = clock_.nowMs(); }

void SessionService::relay(int64_t id, bool open) {
  proxied(id);
  int& n = relays_[id];
  n += open ? 1 : -1;
  if (n <= 0) relays_.erase(id);
}

std::optional<model::ActualSession> SessionService::runtime(int64_t id) const {
  auto it = runtime_.find(id);
  if (it == runtime_.end()) return std::nullopt;
  return it->second;
}

Result<SessionEndpoint> SessionService::open(const Principal& p, int64_t id) const {
  auto it = world_.jobs.find(id);
  if (it == world_.jobs.end() || !it->second.session || !p.isUser() ||
      !isOwnerOrShared(p, it->second))
    return noSession(id);
  const Job& j = it->second;
  if (model::isTerminal(j.state))
    return Status::FailedPrecondition("session " + std::to_string(id) + " has ended (" +
                                      model::jobStateName(j.state) + ")");
  auto rt = runtime_.find(id);
  if (j.state != JobState::kRunning || rt == runtime_.end() || !rt->second.ready)
    return Status::Unavailable("session " + std::to_string(id) + " is starting");
  return SessionEndpoint{firstRank(j).host, j.session->app, rt->second.token};
}

Result<SessionEndpoint> SessionService::openSsh(const Principal& p, int64_t id) const {
  // Its owner's only: a login is a shell as them, whoever the session is shared with.
  auto it = world_.jobs.find(id);
  if (it == world_.jobs.end() || !it->second.session || !p.isUser() || p.name != it->second.user)
    return noSession(id);
  auto endpoint = open(p, id);
  if (!endpoint.ok()) return endpoint.status();
  auto rt = runtime_.find(id);
  if (rt->second.sshHostKey.empty())
    return Status::FailedPrecondition("session " + std::to_string(id) + ": host '" +
                                      endpoint->host + "' offers no SSH");
  endpoint->token.clear();
  return endpoint;
}

}  // namespace allot::control
