#include "model/json.h"

#include <algorithm>
#include <optional>

#include "common/time_format.h"
#include "model/json_fields.h"
#include "model/json_parts.h"

namespace allot::model {
namespace {

using fields::nullIfEmpty;
using fields::timeOrNull;
using fields::valueOrNull;

json limitJson(int v) { return v < 0 ? json(nullptr) : json(v); }
json durationOrNull(TimeMs ms) { return ms ? json(formatDurationSpec(ms)) : json(nullptr); }

// Unix ids and group ids: -1 is "none", which the API writes as null.
json idOrNull(int64_t id) { return id >= 0 ? json(id) : json(nullptr); }

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

// Which registries the team has a login to, and whose: never the password, sealed or not.
static json registryLoginsJson(const Team& t) {
  json out = json::array();
  for (const auto& l : t.registryLogins)
    out.push_back({{"registry", l.registry},
                   {"username", l.username},
                   {"set_by", l.setBy},
                   {"set_at", formatIso8601(l.setAt)}});
  return out;
}

json toJson(const Team& t) {
  return {{"name", t.name},
          {"created_at", formatIso8601(t.createdAt)},
          {"gid", idOrNull(t.gid)},
          {"quota", quotaJson(t)},
          {"image_allow", t.imageAllow},
          {"default_image", fields::nullIfEmpty(t.defaultImage)},
          {"registry_logins", registryLoginsJson(t)}};
}

json teamRolesJson(const std::map<std::string, Role>& teams) {
  json out = json::object();
  for (const auto& [team, role] : teams) out[team] = roleName(role);
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

json projectSplit(const Project& p) {
  return {{"name", p.name}, {"team", p.team}, {"guaranteed", guaranteedJson(p.guaranteed)}};
}

json toJson(const Project& p) {
  json out = projectSplit(p);
  out["created_at"] = formatIso8601(p.createdAt);
  return out;
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
          {"run_as_owner", h.runAsOwner},
          {"address", h.address},
          {"images", h.images}};
}

// The job's fields without its ranks, which toListedJson adds for a gang.
static json toJsonFlat(const Job& j, size_t maxSpecBytes = 0);

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
json rankJson(const Rank& k) {
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
  if (isGang(j) && !j.ranks.empty()) {
    out["ranks"] = ranksJson(j.ranks);
    out["master_port"] = j.masterPort == 0 ? json(nullptr) : json(j.masterPort);
  }
  if (j.session) out["session"] = toJson(*j.session);
  return out;
}

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

// What the API and the store both say of a job, word for word: its request and where it stands.
// Built by emplace, not from an initializer list: every submission builds this three times (its
// reply, the reply once placed, its stored document), and nlohmann's initializer lists make a
// two-element array per field first, three times the cost.
json jobCommon(const Job& j) {
  json out = json::object();
  auto& o = *out.get_ptr<json::object_t*>();
  o.emplace("id", j.id);
  o.emplace("name", j.name);
  o.emplace("team", j.team);
  o.emplace("user", j.user);
  o.emplace("gpus", j.resources.gpus);
  o.emplace("gpu_models", j.resources.gpuModels);
  o.emplace("gpu_milli", j.resources.gpuMilli);
  o.emplace("gpu_memory_mib", j.resources.gpuMemoryMib);
  o.emplace("cpu_millis", j.resources.cpuMillis);
  o.emplace("memory_mib", j.resources.memoryMib);
  o.emplace("priority", j.priority);
  o.emplace("preemptible", j.preemptible);
  o.emplace("whole_host", j.resources.wholeHost);
  o.emplace("hosts", j.resources.hosts);
  o.emplace("state", jobStateName(j.state));
  o.emplace("gpu_indices", firstRank(j).gpuIndices);
  o.emplace("gpu_uuids", firstRank(j).gpuUuids);
  o.emplace("exit_code", valueOrNull(j.exitCode));
  o.emplace("signal", valueOrNull(j.signal));
  o.emplace("cancel_requested", j.cancelRequested);
  o.emplace("preemptions", j.preemptions);
  o.emplace("evicting", j.evicting);
  o.emplace("dependencies", dependenciesJson(j.dependencies));
  return out;
}

json arrayJson(const Job& j) {
  if (j.arrayId == 0) return nullptr;
  return {{"id", j.arrayId}, {"index", j.arrayIndex}, {"limit", j.arrayLimit}};
}

json dependenciesJson(const std::vector<Dependency>& deps) {
  json out = json::array();
  for (const auto& d : deps) out.push_back({{"kind", dependencyKindName(d.kind)}, {"job", d.job}});
  return out;
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
  out["held_by"] = nullIfEmpty(j.heldBy);
  out["requeue_requested_by"] = nullIfEmpty(j.requeueRequestedBy);
  out["workdir"] = nullIfEmpty(j.workdir);
  out["image"] = nullIfEmpty(j.image);
  out["image_digest"] = nullIfEmpty(j.imageDigest);
  out["image_min_cuda"] = nullIfEmpty(j.imageMinCuda);
  out["array"] = arrayJson(j);
  out["submitted_at"] = formatIso8601(j.submittedAt);
  out["scheduled_at"] = timeOrNull(j.scheduledAt);
  out["started_at"] = timeOrNull(j.startedAt);
  out["finished_at"] = timeOrNull(j.finishedAt);
  if (cut) out["spec_truncated"] = true;
  return out;
}

// What the API and the store both say of an upgrade and of each of its hosts.
json upgradeHostCommon(const UpgradeHost& h) {
  return {{"host", h.host}, {"state", upgradeHostStateName(h.state)}};
}

json upgradeCommon(const Upgrade& u) {
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

}  // namespace allot::model
