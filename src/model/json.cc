#include "model/json.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "common/time_format.h"
#include "model/agent_protocol.h"
#include "model/json_fields.h"

namespace allot::model {
namespace {

using fields::nullIfEmpty;
using fields::objectAt;
using fields::parseStored;
using fields::readOptional;
using fields::timeOrNull;
using fields::valueOrNull;

json limitJson(int v) { return v < 0 ? json(nullptr) : json(v); }
int readLimit(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return -1;
  return it->get<int>();
}

json durationOrNull(TimeMs ms) { return ms ? json(formatDurationSpec(ms)) : json(nullptr); }

// Unix ids and group ids: -1 is "none", which the API writes as null.
json idOrNull(int64_t id) { return id >= 0 ? json(id) : json(nullptr); }

json idlePolicyStoreDoc(const IdlePolicy& p) {
  return {{"threshold_percent", p.thresholdPct},
          {"after_ms", p.afterMs},
          {"action", idleActionName(p.action)},
          {"grace_ms", p.graceMs},
          {"webhook", p.webhook}};
}

// Absent in documents written before idle policies: none set, the default applies.
std::optional<IdlePolicy> readIdlePolicy(const json& d) {
  const json* it = objectAt(d, "idle_policy");
  if (!it) return std::nullopt;
  IdlePolicy p;
  p.thresholdPct = it->value("threshold_percent", p.thresholdPct);
  p.afterMs = it->value("after_ms", p.afterMs);
  p.action = parseIdleAction(it->value("action", "notify")).value_or(IdleAction::kNotify);
  p.graceMs = it->value("grace_ms", p.graceMs);
  p.webhook = it->value("webhook", "");
  return p;
}

}  // namespace

json guaranteedJson(const std::map<std::string, int>& guaranteed) {
  json out = json::object();
  for (const auto& [model, n] : guaranteed) out[model.empty() ? kAnyModelJsonKey : model] = n;
  return out;
}

std::map<std::string, int> guaranteedFromJson(const json& j) {
  std::map<std::string, int> out;
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items()) out[k == kAnyModelJsonKey ? "" : k] = v.get<int>();
  return out;
}

json quotaJson(const Team& t) {
  return {{"guaranteed", guaranteedJson(t.quota.guaranteed)},
          {"borrow_limit", limitJson(t.quota.borrowLimit)},
          {"lend_limit", limitJson(t.quota.lendLimit)},
          {"weight", t.quota.weight},
          {"lend_dedicated", t.lendDedicated},
          {"contour_limits", t.quota.contourLimits}};
}

json toJson(const Team& t) {
  return {{"name", t.name},
          {"created_at", formatIso8601(t.createdAt)},
          {"gid", idOrNull(t.gid)},
          {"quota", quotaJson(t)}};
}

json toStoreDoc(const Team& t) {
  json out = quotaJson(t);
  out["name"] = t.name;
  out["created_ms"] = t.createdAt;
  out["usage_gpu_seconds"] = t.usageGpuSeconds;
  out["usage_ms"] = t.usageAt;
  if (t.idlePolicy) out["idle_policy"] = idlePolicyStoreDoc(*t.idlePolicy);
  if (t.gid >= 0) out["gid"] = t.gid;
  return out;
}

// Teams stored before quotas existed have an empty document: every field has its default.
static Team teamFromStoreDocOrThrow(const json& d) {
  Team t;
  t.name = d.value("name", "");
  t.createdAt = d.value("created_ms", TimeMs{0});
  t.quota.guaranteed = guaranteedFromJson(d.value("guaranteed", json::object()));
  t.quota.borrowLimit = readLimit(d, "borrow_limit");
  t.quota.lendLimit = readLimit(d, "lend_limit");
  t.quota.weight = d.value("weight", 1.0);
  t.lendDedicated = d.value("lend_dedicated", false);
  t.quota.contourLimits = d.value("contour_limits", std::map<std::string, int>{});
  t.usageGpuSeconds = d.value("usage_gpu_seconds", 0.0);
  t.usageAt = d.value("usage_ms", TimeMs{0});
  t.idlePolicy = readIdlePolicy(d);
  t.gid = d.value("gid", int64_t{-1});
  return t;
}

namespace {

json teamRolesJson(const std::map<std::string, Role>& teams) {
  json out = json::object();
  for (const auto& [team, role] : teams) out[team] = roleName(role);
  return out;
}

std::map<std::string, Role> teamRolesFromJson(const json& j) {
  std::map<std::string, Role> out;
  if (!j.is_object()) return out;
  for (const auto& [team, role] : j.items()) {
    if (auto r = role.is_string() ? parseRole(role.get<std::string>()) : std::nullopt;
        r && isTeamRole(*r))
      out[team] = *r;
  }
  return out;
}

// What the API and the store both say of a user.
json userAccess(const User& u) {
  json out = {{"teams", teamRolesJson(u.teams)},
              {"platform_admin", u.platformAdmin},
              {"kind", userKindName(u.kind)},
              {"source", userSourceName(u.source)},
              {"disabled", u.disabled}};
  if (!u.createdBy.empty()) out["created_by"] = u.createdBy;
  return out;
}

// What identifies a key, in both views.
json sshKeyIdentity(const SshKey& k) {
  return {{"fingerprint", k.fingerprint}, {"type", k.type}, {"comment", k.comment}};
}

}  // namespace

// The API's view: never the password hash.
json toJson(const User& u) {
  json out = userAccess(u);
  out["name"] = u.name;
  out["has_password"] = !u.passwordHash.empty();
  out["uid"] = idOrNull(u.uid);
  out["gid"] = idOrNull(u.gid);
  out["created_at"] = formatIso8601(u.createdAt);
  return out;
}

json toStoreDoc(const User& u) {
  json out = userAccess(u);
  out["uid"] = u.uid;
  out["gid"] = u.gid;
  if (!u.passwordHash.empty()) out["password_hash"] = u.passwordHash;
  if (!u.sshKeys.empty()) {
    json keys = json::array();
    for (const auto& k : u.sshKeys) {
      json key = sshKeyIdentity(k);
      key["blob"] = k.blob;
      key["added_ms"] = k.addedAt;
      keys.push_back(std::move(key));
    }
    out["ssh_keys"] = std::move(keys);
  }
  return out;
}

// Users stored before schema 8 have an empty document; the store fills teams and the platform
// admin flag from their team and role columns.
static User userFromStoreDocOrThrow(const json& d) {
  User u;
  u.teams = teamRolesFromJson(d.value("teams", json::object()));
  u.platformAdmin = d.value("platform_admin", false);
  u.kind = d.value("kind", "") == "service" ? UserKind::kService : UserKind::kHuman;
  u.source = d.value("source", "") == "ldap" ? UserSource::kLdap : UserSource::kLocal;
  u.passwordHash = d.value("password_hash", "");
  u.disabled = d.value("disabled", false);
  u.uid = d.value("uid", int64_t{-1});
  u.gid = d.value("gid", int64_t{-1});
  u.createdBy = d.value("created_by", "");
  // Documents written before SSH keys existed have none.
  if (auto it = d.find("ssh_keys"); it != d.end() && it->is_array()) {
    for (const auto& k : *it) {
      u.sshKeys.push_back({k.value("fingerprint", ""), k.value("type", ""), k.value("blob", ""),
                           k.value("comment", ""), k.value("added_ms", TimeMs{0})});
    }
  }
  return u;
}

// The API's view of a key: what identifies it; the blob stays in the store and authorized_keys.
json toJson(const SshKey& k) {
  json out = sshKeyIdentity(k);
  out["added_at"] = formatIso8601(k.addedAt);
  return out;
}

// The API's view of a token: never its hash (nor, after creation, its secret).
json toJson(const ApiToken& t) {
  return {{"id", t.id},
          {"name", t.name},
          {"user", t.owner},
          {"kind", tokenKindName(t.kind)},
          {"created_at", formatIso8601(t.createdAt)},
          {"expires_at", timeOrNull(t.expiresAt)}};
}

static json projectSplit(const Project& p) {
  return {{"name", p.name}, {"team", p.team}, {"guaranteed", guaranteedJson(p.guaranteed)}};
}

json toJson(const Project& p) {
  json out = projectSplit(p);
  out["created_at"] = formatIso8601(p.createdAt);
  return out;
}

json toStoreDoc(const Project& p) {
  json out = projectSplit(p);
  out["created_ms"] = p.createdAt;
  if (p.idlePolicy) out["idle_policy"] = idlePolicyStoreDoc(*p.idlePolicy);
  return out;
}

static Project projectFromStoreDocOrThrow(const json& d) {
  Project p;
  p.name = d.value("name", "");
  p.team = d.value("team", "");
  p.createdAt = d.value("created_ms", TimeMs{0});
  p.guaranteed = guaranteedFromJson(d.value("guaranteed", json::object()));
  p.idlePolicy = readIdlePolicy(d);
  return p;
}

json toJson(const Event& e) {
  json details = json::parse(e.details, nullptr, /*allow_exceptions=*/false);
  if (!details.is_object()) details = json::object();
  return {{"id", e.id},
          {"at", formatIso8601(e.at)},
          {"kind", eventKindName(e.kind)},
          {"team", e.team},
          {"project", nullIfEmpty(e.project)},
          {"user", e.user},
          {"job", e.jobId},
          {"hosts", e.hosts},
          {"message", e.message},
          {"details", std::move(details)}};
}

json toJson(const Gpu& g) {
  return {{"index", g.index},
          {"uuid", g.uuid},
          {"minor", g.minor},
          {"model", g.model},
          {"memory_mib", g.memoryMib},
          {"numa_node", g.numaNode},
          {"nvlink_domain", g.nvlinkDomain},
          {"pcie_switch", g.pcieSwitch},
          {"driver_version", g.driverVersion},
          {"cuda_version", g.cudaVersion},
          {"dedicated_to", nullIfEmpty(g.dedicatedTo)},
          {"shared", g.shared}};
}

Gpu gpuFromJson(const json& j) {
  Gpu g;
  g.index = j.value("index", 0);
  g.uuid = j.value("uuid", "");
  g.minor = j.value("minor", 0);
  g.model = j.value("model", "");
  g.memoryMib = j.value("memory_mib", int64_t{0});
  g.numaNode = j.value("numa_node", -1);
  // Absent in stores and from agents older than topology reporting: unknown.
  g.nvlinkDomain = j.value("nvlink_domain", -1);
  g.pcieSwitch = j.value("pcie_switch", -1);
  g.driverVersion = j.value("driver_version", "");
  g.cudaVersion = j.value("cuda_version", "");
  if (auto it = j.find("dedicated_to"); it != j.end() && it->is_string()) g.dedicatedTo = *it;
  g.shared = j.value("shared", false);
  return g;
}

json gpusJson(const std::vector<Gpu>& gpus) {
  json out = json::array();
  for (const auto& g : gpus) out.push_back(toJson(g));
  return out;
}

namespace {

// What the API and the store both say of a host: its hardware and its agent.
json hostHardware(const Host& h) {
  return {{"name", h.name},
          {"simulated", h.simulated},
          {"gpu_provider", h.gpuProvider},
          {"cpus", h.cpus},
          {"memory_mib", h.memoryMib},
          {"gpus", gpusJson(h.gpus)},
          {"agent_version", h.agentVersion},
          {"cgroup", h.cgroup},
          {"run_as_owner", h.runAsOwner}};
}

}  // namespace

// The job's fields without its ranks, which toJson and toStoreDoc add for a gang.
static json toJsonFlat(const Job& j, size_t maxSpecBytes = 0);
static json toStoreDocFlat(const Job& j);

json toJson(const Host& h) {
  json out = hostHardware(h);
  out["state"] = hostStateName(h.state);
  out["dedicated_to"] = nullIfEmpty(h.dedicatedTo);
  out["contour"] = nullIfEmpty(h.contour);
  out["joined_at"] = formatIso8601(h.joinedAt);
  out["last_seen_at"] = formatIso8601(h.lastSeenAt);
  out["admin_state"] = adminStateName(h.adminState);
  out["admin_reason"] = nullIfEmpty(h.adminReason);
  if (h.adminState == AdminState::kDraining) {
    out["drain_deadline"] = timeOrNull(h.drainDeadline);
    out["drain_reason"] = nullIfEmpty(h.adminReason);
  }
  // "shared", or the team the host is assigned to.
  out["pool"] = h.dedicatedTo.empty() ? "shared" : h.dedicatedTo;
  out["driver_version"] = nullIfEmpty(hostDriverVersion(h));
  out["cuda_version"] = nullIfEmpty(hostCudaVersion(h));
  out["task"] = h.task ? json(h.task->purpose) : json(nullptr);
  out["handover_to"] =
      h.handover ? json(h.handover->team.empty() ? "shared" : h.handover->team) : json(nullptr);
  out["health_checked_at"] = timeOrNull(h.healthCheckedAt);
  return out;
}

json toJson(const HostTransition& t) {
  return {{"id", t.id},
          {"host", t.host},
          {"at", formatIso8601(t.at)},
          {"by", t.by},
          {"from", adminStateName(t.from)},
          {"to", adminStateName(t.to)},
          {"reason", nullIfEmpty(t.reason)},
          {"output", nullIfEmpty(t.output)}};
}

// A rank as both views write it; the API adds its number, the store its message.
static json rankJson(const Rank& k) {
  return {{"host", k.host},
          {"gpu_indices", k.gpuIndices},
          {"gpu_uuids", k.gpuUuids},
          {"state", rankStateName(k.state)},
          {"exit_code", valueOrNull(k.exitCode)},
          {"signal", valueOrNull(k.signal)}};
}

static json ranksJson(const std::vector<Rank>& ranks) {
  json out = json::array();
  for (size_t r = 0; r < ranks.size(); ++r) {
    json rank = rankJson(ranks[r]);
    rank["rank"] = r;
    out.push_back(std::move(rank));
  }
  return out;
}

json toJson(const SessionSpec& s) {
  return {{"profile", s.profile},           {"app", s.app},
          {"storage", s.storage},           {"idle_threshold_percent", s.idleThresholdPct},
          {"idle_after_ms", s.idleAfterMs}, {"shared_with", s.sharedWith}};
}

SessionSpec sessionSpecFromJson(const json& j) {
  SessionSpec s;
  s.profile = j.value("profile", "");
  s.app = j.value("app", "command");
  s.storage = j.value("storage", "scratch");
  s.idleThresholdPct = j.value("idle_threshold_percent", 5.0);
  s.idleAfterMs = j.value("idle_after_ms", int64_t{0});
  s.sharedWith = j.value("shared_with", std::vector<std::string>{});
  return s;
}

json toJson(const Job& j) { return toListedJson(j, 0); }

json toListedJson(const Job& j, size_t maxSpecBytes) {
  json out = toJsonFlat(j, maxSpecBytes);
  if (isGang(j) && !j.ranks.empty()) out["ranks"] = ranksJson(j.ranks);
  if (j.session) out["session"] = toJson(*j.session);
  return out;
}

namespace {

// The command cut to `max` bytes, the last argument kept ending in "..." (cut at a character
// boundary); nullopt when it fits with the environment.
std::optional<std::vector<std::string>> cutSpec(const Job& j, size_t max) {
  size_t bytes = 0;
  for (const auto& a : j.command) bytes += a.size() + 1;
  for (const auto& [k, v] : j.env) bytes += k.size() + v.size() + 2;
  if (max == 0 || bytes <= max) return std::nullopt;
  std::vector<std::string> out;
  size_t left = max;
  for (const auto& a : j.command) {
    if (a.size() < left) {
      out.push_back(a);
      left -= a.size() + 1;
      continue;
    }
    size_t keep = left;
    while (keep > 0 && (static_cast<unsigned char>(a[keep]) & 0xC0) == 0x80) --keep;
    out.push_back(a.substr(0, keep) + "...");
    break;
  }
  return out;
}

}  // namespace

// What the API and the store both say of a job, word for word: its request and where it stands.
static json jobCommon(const Job& j) {
  return {{"id", j.id},
          {"name", j.name},
          {"team", j.team},
          {"user", j.user},
          {"gpus", j.resources.gpus},
          {"gpu_models", j.resources.gpuModels},
          {"gpu_milli", j.resources.gpuMilli},
          {"gpu_memory_mib", j.resources.gpuMemoryMib},
          {"cpu_millis", j.resources.cpuMillis},
          {"memory_mib", j.resources.memoryMib},
          {"priority", j.priority},
          {"preemptible", j.preemptible},
          {"whole_host", j.resources.wholeHost},
          {"hosts", j.resources.hosts},
          {"state", jobStateName(j.state)},
          {"gpu_indices", firstRank(j).gpuIndices},
          {"gpu_uuids", firstRank(j).gpuUuids},
          {"exit_code", valueOrNull(j.exitCode)},
          {"signal", valueOrNull(j.signal)},
          {"cancel_requested", j.cancelRequested},
          {"preemptions", j.preemptions},
          {"evicting", j.evicting}};
}

// The API's view: unset texts and times are null, times ISO 8601, the spec cut to fit a listing.
json toJsonFlat(const Job& j, size_t maxSpecBytes) {
  static const std::map<std::string, std::string> kNoEnv;
  const auto cut = cutSpec(j, maxSpecBytes);
  json out = jobCommon(j);
  out["project"] = nullIfEmpty(j.project);
  out["command"] = cut ? *cut : j.command;
  out["env"] = cut ? kNoEnv : j.env;
  out["max_runtime"] = durationOrNull(j.maxRuntimeMs);
  out["min_driver"] = nullIfEmpty(j.resources.minDriver);
  out["min_cuda"] = nullIfEmpty(j.resources.minCuda);
  out["contour"] = nullIfEmpty(j.contour);
  out["reason"] = nullIfEmpty(j.reason);
  out["host"] = nullIfEmpty(firstRank(j).host);
  out["evicting_since"] = timeOrNull(j.evictingSince);
  out["evicted_for"] = nullIfEmpty(j.evictedFor);
  out["submitted_at"] = formatIso8601(j.submittedAt);
  out["started_at"] = timeOrNull(j.startedAt);
  out["finished_at"] = timeOrNull(j.finishedAt);
  if (cut) out["spec_truncated"] = true;
  return out;
}

json toStoreDoc(const Host& h) {
  json out = hostHardware(h);
  out["joined_ms"] = h.joinedAt;
  out["last_seen_ms"] = h.lastSeenAt;
  out["dedicated_to"] = h.dedicatedTo;
  out["admin_state"] = adminStateName(h.adminState);
  out["admin_reason"] = h.adminReason;
  out["drain_deadline_ms"] = h.drainDeadline;
  if (h.task) out["task"] = toJson(*h.task);
  out["last_task_id"] = h.lastTaskId;
  if (h.handover) {
    out["handover"] = {{"team", h.handover->team},         {"by", h.handover->by},
                       {"reason", h.handover->reason},     {"lease", h.handover->leaseId},
                       {"upgrade", h.handover->upgradeId}, {"profile", h.handover->profile},
                       {"wipe", h.handover->wipe}};
  }
  out["expected_gpu_count"] = h.expectedGpuCount;
  out["expected_gpu_models"] = h.expectedGpuModels;
  out["health_checked_ms"] = h.healthCheckedAt;
  out["contour"] = h.contour;
  if (h.credentialReset) out["credential_reset"] = true;
  return out;
}

static Host hostFromStoreDocOrThrow(const json& d) {
  Host h;
  h.name = d.at("name").get<std::string>();
  h.simulated = d.value("simulated", false);
  h.gpuProvider = d.value("gpu_provider", "");
  h.cpus = d.value("cpus", 0);
  h.memoryMib = d.value("memory_mib", int64_t{0});
  for (const auto& g : d.value("gpus", json::array())) h.gpus.push_back(gpuFromJson(g));
  h.agentVersion = d.value("agent_version", "");
  h.cgroup = d.value("cgroup", "");
  h.runAsOwner = d.value("run_as_owner", "");
  h.joinedAt = d.value("joined_ms", TimeMs{0});
  h.lastSeenAt = d.value("last_seen_ms", TimeMs{0});
  h.dedicatedTo = d.value("dedicated_to", "");
  // Documents written before admin states existed load as available.
  h.adminState = parseStored(&parseAdminState, d.value("admin_state", "available"), "admin_state");
  h.adminReason = d.value("admin_reason", "");
  h.drainDeadline = d.value("drain_deadline_ms", TimeMs{0});
  if (d.contains("task")) {
    auto task = hostTaskFromJson(d.at("task"));
    if (!task.ok()) throw std::runtime_error("host " + h.name + ": " + task.status().message());
    h.task = *task;
  } else if (d.contains("hook")) {  // written before host tasks: a reprovisioning hook alone
    auto hook = hookSpecFromJson(d.at("hook"));
    if (!hook.ok()) throw std::runtime_error("host " + h.name + ": " + hook.status().message());
    h.task = model::HostTask{hook->id, "reprovision", std::nullopt, *hook, std::nullopt};
  }
  h.lastTaskId = std::max(d.value("last_task_id", int64_t{0}), h.task ? h.task->id : 0);
  if (const json* ho = objectAt(d, "handover")) {
    h.handover = Handover{ho->value("team", ""),
                          ho->value("by", ""),
                          ho->value("reason", ""),
                          ho->value("lease", int64_t{0}),
                          ho->value("upgrade", int64_t{0}),
                          ho->value("profile", ""),
                          ho->value("wipe", true)};
  }
  h.expectedGpuCount = d.value("expected_gpu_count", -1);
  h.expectedGpuModels = d.value("expected_gpu_models", std::vector<std::string>{});
  h.healthCheckedAt = d.value("health_checked_ms", TimeMs{0});
  h.contour = d.value("contour", "");  // empty: written before contours
  h.credentialReset = d.value("credential_reset", false);
  return h;
}

// A single-host job's one rank is its flat host and GPU fields, as documents were before gangs.
json toStoreDoc(const Job& j) {
  json out = toStoreDocFlat(j);
  if (isGang(j) && !j.ranks.empty()) {
    json ranks = json::array();
    for (const Rank& k : j.ranks) {
      json r = rankJson(k);
      if (!k.message.empty()) r["message"] = k.message;
      ranks.push_back(std::move(r));
    }
    out["ranks"] = std::move(ranks);
    out["failed_rank"] = j.failedRank;
  }
  if (j.session) out["session"] = toJson(*j.session);
  return out;
}

json toStoreDocFlat(const Job& j) {
  json out = jobCommon(j);
  out["project"] = j.project;
  out["command"] = j.command;
  out["env"] = j.env;
  out["max_runtime_ms"] = j.maxRuntimeMs;
  out["min_driver"] = j.resources.minDriver;
  out["min_cuda"] = j.resources.minCuda;
  out["contour"] = j.contour;
  out["reason"] = j.reason;
  out["host"] = firstRank(j).host;
  out["evicting_since_ms"] = j.evictingSince;
  out["evicted_for"] = j.evictedFor;
  out["submitted_ms"] = j.submittedAt;
  out["scheduled_ms"] = j.scheduledAt;
  out["started_ms"] = j.startedAt;
  out["finished_ms"] = j.finishedAt;
  return out;
}

static Job jobFromStoreDocOrThrow(const json& d) {
  Job j;
  j.id = d.at("id").get<int64_t>();
  j.name = d.value("name", "");
  j.team = d.value("team", "");
  j.project = d.value("project", "");
  j.user = d.value("user", "");
  j.command = d.value("command", std::vector<std::string>{});
  j.env = d.value("env", std::map<std::string, std::string>{});
  j.resources.gpus = d.value("gpus", 0);
  if (auto it = d.find("gpu_models"); it != d.end()) {
    j.resources.gpuModels = it->get<std::vector<std::string>>();
  } else if (std::string one = d.value("gpu_model", ""); !one.empty()) {
    j.resources.gpuModels = {one};  // written before a job could name several models
  }
  j.resources.gpuMilli = d.value("gpu_milli", 1000);
  j.resources.gpuMemoryMib = d.value("gpu_memory_mib", int64_t{0});
  j.resources.cpuMillis = d.value("cpu_millis", 0);
  j.resources.memoryMib = d.value("memory_mib", int64_t{0});
  j.priority = d.value("priority", 0);
  j.preemptible = d.value("preemptible", false);
  j.resources.wholeHost = d.value("whole_host", false);
  j.resources.hosts = d.value("hosts", 1);
  j.maxRuntimeMs = d.value("max_runtime_ms", int64_t{0});
  j.resources.minDriver = d.value("min_driver", "");
  j.resources.minCuda = d.value("min_cuda", "");
  j.contour = d.value("contour", "");  // empty: written before contours
  j.state = parseJobState(d.value("state", "queued")).value_or(JobState::kQueued);
  j.reason = d.value("reason", "");
  for (const auto& r : d.value("ranks", json::array())) {
    Rank k;
    k.host = r.value("host", "");
    k.gpuIndices = r.value("gpu_indices", std::vector<int>{});
    k.gpuUuids = r.value("gpu_uuids", std::vector<std::string>{});
    k.state = parseRankState(r.value("state", "pending")).value_or(RankState::kPending);
    k.exitCode = readOptional<int>(r, "exit_code");
    k.signal = readOptional<int>(r, "signal");
    k.message = r.value("message", "");
    j.ranks.push_back(std::move(k));
  }
  if (std::string host = d.value("host", ""); j.ranks.empty() && !host.empty()) {
    Rank k;
    k.host = std::move(host);
    k.gpuIndices = d.value("gpu_indices", std::vector<int>{});
    k.gpuUuids = d.value("gpu_uuids", std::vector<std::string>{});
    j.ranks.push_back(std::move(k));
  }
  j.failedRank = d.value("failed_rank", -1);
  j.exitCode = readOptional<int>(d, "exit_code");
  j.signal = readOptional<int>(d, "signal");
  j.cancelRequested = d.value("cancel_requested", false);
  j.preemptions = d.value("preemptions", 0);
  j.evicting = d.value("evicting", false);
  j.evictingSince = d.value("evicting_since_ms", TimeMs{0});
  j.evictedFor = d.value("evicted_for", "");
  j.submittedAt = d.value("submitted_ms", TimeMs{0});
  j.scheduledAt = d.value("scheduled_ms", TimeMs{0});
  j.startedAt = d.value("started_ms", TimeMs{0});
  j.finishedAt = d.value("finished_ms", TimeMs{0});
  if (const json* session = objectAt(d, "session")) j.session = sessionSpecFromJson(*session);
  return j;
}

// What the API and the store both say of an upgrade and of each of its hosts.
static json upgradeHostCommon(const UpgradeHost& h) {
  return {{"host", h.host}, {"state", upgradeHostStateName(h.state)}};
}

static json upgradeCommon(const Upgrade& u) {
  return {{"id", u.id},           {"pool", u.pool},
          {"profile", u.profile}, {"max_unavailable", u.maxUnavailable},
          {"by", u.by},           {"state", upgradeStateName(u.state)}};
}

json toJson(const Upgrade& u) {
  json hosts = json::array();
  for (const auto& h : u.hosts) {
    json host = upgradeHostCommon(h);
    host["reason"] = nullIfEmpty(h.reason);
    host["started_at"] = timeOrNull(h.startedAt);
    host["ended_at"] = timeOrNull(h.endedAt);
    hosts.push_back(std::move(host));
  }
  json out = upgradeCommon(u);
  out["drain_deadline"] = durationOrNull(u.drainDeadlineMs);
  out["created_at"] = formatIso8601(u.createdAt);
  out["ended_at"] = timeOrNull(u.endedAt);
  out["stopped_at"] = nullIfEmpty(u.stoppedAt);
  out["reason"] = nullIfEmpty(u.reason);
  out["hosts"] = std::move(hosts);
  return out;
}

json toStoreDoc(const Upgrade& u) {
  json hosts = json::array();
  for (const auto& h : u.hosts) {
    json host = upgradeHostCommon(h);
    host["reason"] = h.reason;
    host["started_ms"] = h.startedAt;
    host["ended_ms"] = h.endedAt;
    hosts.push_back(std::move(host));
  }
  json out = upgradeCommon(u);
  out["drain_deadline_ms"] = u.drainDeadlineMs;
  out["created_ms"] = u.createdAt;
  out["ended_ms"] = u.endedAt;
  out["stopped_at"] = u.stoppedAt;
  out["reason"] = u.reason;
  out["hosts"] = std::move(hosts);
  return out;
}

static Upgrade upgradeFromStoreDocOrThrow(const json& d) {
  Upgrade u;
  u.id = d.at("id").get<int64_t>();
  u.pool = d.value("pool", "");
  u.profile = d.value("profile", "");
  u.maxUnavailable = d.value("max_unavailable", 1);
  u.drainDeadlineMs = d.value("drain_deadline_ms", int64_t{0});
  u.by = d.value("by", "");
  u.createdAt = d.value("created_ms", TimeMs{0});
  u.state = parseStored(&parseUpgradeState, d.value("state", "running"), "upgrade state");
  u.endedAt = d.value("ended_ms", TimeMs{0});
  u.stoppedAt = d.value("stopped_at", "");
  u.reason = d.value("reason", "");
  for (const auto& h : d.value("hosts", json::array())) {
    UpgradeHost uh;
    uh.host = h.at("host").get<std::string>();
    uh.state =
        parseStored(&parseUpgradeHostState, h.value("state", "pending"), "upgrade host state");
    uh.reason = h.value("reason", "");
    uh.startedAt = h.value("started_ms", TimeMs{0});
    uh.endedAt = h.value("ended_ms", TimeMs{0});
    u.hosts.push_back(std::move(uh));
  }
  return u;
}

// The store's decoders: the *OrThrow bodies above throw (nlohmann on a missing or mistyped
// field, parseStored on an unknown name); what leaves the model is a Result.
Result<Team> teamFromStoreDoc(const json& d) {
  return fields::decodedOrStatus([&] { return teamFromStoreDocOrThrow(d); });
}

Result<User> userFromStoreDoc(const json& d) {
  return fields::decodedOrStatus([&] { return userFromStoreDocOrThrow(d); });
}

Result<Project> projectFromStoreDoc(const json& d) {
  return fields::decodedOrStatus([&] { return projectFromStoreDocOrThrow(d); });
}

Result<Host> hostFromStoreDoc(const json& d) {
  return fields::decodedOrStatus([&] { return hostFromStoreDocOrThrow(d); });
}

Result<Job> jobFromStoreDoc(const json& d) {
  return fields::decodedOrStatus([&] { return jobFromStoreDocOrThrow(d); });
}

Result<Upgrade> upgradeFromStoreDoc(const json& d) {
  return fields::decodedOrStatus([&] { return upgradeFromStoreDocOrThrow(d); });
}

}  // namespace allot::model
