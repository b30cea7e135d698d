// The store's documents (store/documents.h): every field, times in ms, secrets' hashes included.
// The pieces they share with the API's forms are model/json_parts.h.

#include "store/documents.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "model/agent_protocol.h"
#include "model/json_fields.h"
#include "model/json_parts.h"
#include "model/json_writer.h"

namespace allot::store {

using namespace model;  // NOLINT(google-build-using-namespace): a codec of the model's types
using fields::objectAt;
using fields::parseStored;
using fields::readOptional;

namespace {

int readLimit(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return -1;
  return it->get<int>();
}

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

}  // namespace

json toStoreDoc(const Team& t) {
  json out = quotaJson(t);
  out["name"] = t.name;
  out["created_ms"] = t.createdAt;
  out["usage_gpu_seconds"] = t.usageGpuSeconds;
  out["usage_ms"] = t.usageAt;
  if (t.idlePolicy) out["idle_policy"] = idlePolicyStoreDoc(*t.idlePolicy);
  if (t.gid >= 0) out["gid"] = t.gid;
  if (!t.imageAllow.empty()) out["image_allow"] = t.imageAllow;
  if (!t.defaultImage.empty()) out["default_image"] = t.defaultImage;
  if (!t.registryLogins.empty()) {
    json logins = json::array();
    for (const auto& l : t.registryLogins)
      logins.push_back({{"registry", l.registry},
                        {"username", l.username},
                        {"sealed_password", l.sealedPassword},
                        {"set_by", l.setBy},
                        {"set_ms", l.setAt}});
    out["registry_logins"] = std::move(logins);
  }
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
  t.imageAllow = d.value("image_allow", std::vector<std::string>{});
  t.defaultImage = d.value("default_image", "");
  for (const auto& l : d.value("registry_logins", json::array()))
    t.registryLogins.push_back({l.at("registry").get<std::string>(),
                                l.at("username").get<std::string>(),
                                l.at("sealed_password").get<std::string>(), l.value("set_by", ""),
                                l.value("set_ms", TimeMs{0})});
  return t;
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
  if (h.admittedMemoryMib > 0) out["admitted_memory_mib"] = h.admittedMemoryMib;
  if (!h.admittedGpuMemoryMib.empty()) out["admitted_gpu_memory_mib"] = h.admittedGpuMemoryMib;
  out["health_checked_ms"] = h.healthCheckedAt;
  out["contour"] = h.contour;
  if (h.credentialReset) out["credential_reset"] = true;
  if (h.imagePrunes > 0) out["image_prunes"] = h.imagePrunes;
  if (!h.imagePrepulls.empty()) out["image_prepulls"] = h.imagePrepulls;
  if (!h.imagePrepullTeams.empty()) out["image_prepull_teams"] = h.imagePrepullTeams;
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
  h.address = d.value("address", "");
  h.images = d.value("images", false);
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
  h.admittedMemoryMib = d.value("admitted_memory_mib", int64_t{0});
  h.admittedGpuMemoryMib = d.value("admitted_gpu_memory_mib", std::map<std::string, int64_t>{});
  h.healthCheckedAt = d.value("health_checked_ms", TimeMs{0});
  h.contour = d.value("contour", "");  // empty: written before contours
  h.credentialReset = d.value("credential_reset", false);
  h.imagePrunes = d.value("image_prunes", int64_t{0});
  h.imagePrepulls = d.value("image_prepulls", std::vector<std::string>{});
  h.imagePrepullTeams = d.value("image_prepull_teams", std::map<std::string, std::string>{});
  return h;
}

static json toStoreDocFlat(const Job& j);

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
    if (j.masterPort != 0) out["master_port"] = j.masterPort;
  }
  if (j.session) out["session"] = toJson(*j.session);
  return out;
}

static json toStoreDocFlat(const Job& j) {
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
  out["held_by"] = j.heldBy;
  out["requeue_requested_by"] = j.requeueRequestedBy;
  if (!j.workdir.empty()) out["workdir"] = j.workdir;
  if (!j.image.empty()) out["image"] = j.image;
  if (!j.imageDigest.empty()) out["image_digest"] = j.imageDigest;
  if (!j.imageMinCuda.empty()) out["image_min_cuda"] = j.imageMinCuda;
  if (j.arrayId != 0) out["array"] = arrayJson(j);
  out["submitted_ms"] = j.submittedAt;
  out["scheduled_ms"] = j.scheduledAt;
  out["started_ms"] = j.startedAt;
  out["finished_ms"] = j.finishedAt;
  return out;
}

std::string storeDocText(const Job& j) {
  auto slow = [&] {
    return toStoreDoc(j).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  if ((isGang(j) && !j.ranks.empty()) || j.session) return slow();
  const Rank& rank = firstRank(j);
  std::string out;
  out.reserve(512 + j.command.size() * 16 + j.env.size() * 48);
  JsonWriter w(out);
  // The keys in nlohmann's order (sorted), so that the text is what dump() writes.
  w.beginObject();
  if (j.arrayId != 0) {
    w.key("array");
    w.beginObject();
    w.number("id", j.arrayId);
    w.number("index", j.arrayIndex);
    w.number("limit", j.arrayLimit);
    w.endObject();
  }
  w.boolean("cancel_requested", j.cancelRequested);
  w.strings("command", j.command);
  w.string("contour", j.contour);
  w.number("cpu_millis", j.resources.cpuMillis);
  w.key("dependencies");
  w.beginArray();
  for (const auto& d : j.dependencies) {
    w.element();
    w.beginObject();
    w.number("job", d.job);
    w.string("kind", dependencyKindName(d.kind));
    w.endObject();
  }
  w.endArray();
  w.key("env");
  w.beginObject();
  for (const auto& [k, v] : j.env) {
    w.key(k);
    w.string(v);
  }
  w.endObject();
  w.string("evicted_for", j.evictedFor);
  w.boolean("evicting", j.evicting);
  w.number("evicting_since_ms", j.evictingSince);
  w.numberOrNull("exit_code", j.exitCode);
  w.number("finished_ms", j.finishedAt);
  w.numbers("gpu_indices", rank.gpuIndices);
  w.number("gpu_memory_mib", j.resources.gpuMemoryMib);
  w.number("gpu_milli", j.resources.gpuMilli);
  w.strings("gpu_models", j.resources.gpuModels);
  w.strings("gpu_uuids", rank.gpuUuids);
  w.number("gpus", j.resources.gpus);
  w.string("held_by", j.heldBy);
  w.string("host", rank.host);
  w.number("hosts", j.resources.hosts);
  w.number("id", j.id);
  if (!j.image.empty()) w.string("image", j.image);
  if (!j.imageDigest.empty()) w.string("image_digest", j.imageDigest);
  if (!j.imageMinCuda.empty()) w.string("image_min_cuda", j.imageMinCuda);
  w.number("max_runtime_ms", j.maxRuntimeMs);
  w.number("memory_mib", j.resources.memoryMib);
  w.string("min_cuda", j.resources.minCuda);
  w.string("min_driver", j.resources.minDriver);
  w.string("name", j.name);
  w.boolean("preemptible", j.preemptible);
  w.number("preemptions", j.preemptions);
  w.number("priority", j.priority);
  w.string("project", j.project);
  w.string("reason", j.reason);
  w.string("requeue_requested_by", j.requeueRequestedBy);
  w.number("scheduled_ms", j.scheduledAt);
  w.numberOrNull("signal", j.signal);
  w.number("started_ms", j.startedAt);
  w.string("state", jobStateName(j.state));
  w.number("submitted_ms", j.submittedAt);
  w.string("team", j.team);
  w.string("user", j.user);
  w.boolean("whole_host", j.resources.wholeHost);
  if (!j.workdir.empty()) w.string("workdir", j.workdir);
  w.endObject();
  return w.ok() ? out : slow();
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
  j.masterPort = d.value("master_port", 0);
  j.workdir = d.value("workdir", "");
  j.image = d.value("image", "");
  j.imageDigest = d.value("image_digest", "");
  j.imageMinCuda = d.value("image_min_cuda", "");
  if (const json* array = objectAt(d, "array")) {
    j.arrayId = array->value("id", int64_t{0});
    j.arrayIndex = array->value("index", -1);
    j.arrayLimit = array->value("limit", 0);
  }
  j.exitCode = readOptional<int>(d, "exit_code");
  j.signal = readOptional<int>(d, "signal");
  j.cancelRequested = d.value("cancel_requested", false);
  j.preemptions = d.value("preemptions", 0);
  j.evicting = d.value("evicting", false);
  j.evictingSince = d.value("evicting_since_ms", TimeMs{0});
  j.evictedFor = d.value("evicted_for", "");
  j.heldBy = d.value("held_by", "");
  j.requeueRequestedBy = d.value("requeue_requested_by", "");
  for (const auto& dep : d.value("dependencies", json::array())) {
    // A kind this code does not know (a newer allotd's) waits for the other job to succeed.
    j.dependencies.push_back(
        {parseDependencyKind(dep.value("kind", "")).value_or(DependencyKind::kAfterOk),
         dep.value("job", int64_t{0})});
  }
  j.submittedAt = d.value("submitted_ms", TimeMs{0});
  j.scheduledAt = d.value("scheduled_ms", TimeMs{0});
  j.startedAt = d.value("started_ms", TimeMs{0});
  j.finishedAt = d.value("finished_ms", TimeMs{0});
  if (const json* session = objectAt(d, "session")) j.session = sessionSpecFromJson(*session);
  return j;
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

// The decoders: the *OrThrow bodies above throw (nlohmann on a missing or mistyped field,
// parseStored on an unknown name); what leaves this file is a Result.
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

}  // namespace allot::store
