#include "model/agent_protocol.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "common/bounded_json.h"
#include "model/enum_names.h"
#include "model/image_ref.h"
#include "model/json.h"
#include "model/json_fields.h"
#include "model/json_writer.h"

namespace allot::model {
namespace {

using fields::decodeObjectAt;
using fields::objectAt;
using fields::readOptional;
using fields::valueOrNull;

// Wraps nlohmann's exceptions (missing key, wrong type) into a Status naming what was wrong.
template <typename F>
auto guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("bad ") + what + ": " + e.what());
  }
}

constexpr EnumName<ActualState> kActualStates[] = {{ActualState::kRunning, "running"},
                                                   {ActualState::kExited, "exited"},
                                                   {ActualState::kLost, "lost"},
                                                   {ActualState::kFailedToStart, "failed_to_start"},
                                                   {ActualState::kPulling, "pulling"}};

}  // namespace

const char* actualStateName(ActualState s) { return nameIn(kActualStates, s, "unknown"); }

void applyInventory(Host& h, const Inventory& inv) {
  // 0 is "could not tell": the last known figure stays. Taken as the new figure, a report of 0
  // would reset what the next report's growth is measured against (Cluster::agentConnected
  // fences a host that claims more), and a host could then claim any size unfenced.
  if (inv.cpus > 0) h.cpus = inv.cpus;
  if (inv.memoryMib > 0) h.memoryMib = inv.memoryMib;
  // Dedication and sharing are the admin's word about a GPU, not the agent's: they follow the
  // physical GPU (its UUID, else its index) across re-reports, and the agent cannot set them.
  std::vector<Gpu> gpus = inv.gpus;
  for (auto& g : gpus) {
    g.dedicatedTo.clear();
    g.shared = false;
    for (const auto& old : h.gpus) {
      bool same = !g.uuid.empty() ? old.uuid == g.uuid : old.index == g.index;
      if (!same) continue;
      g.dedicatedTo = old.dedicatedTo;
      g.shared = old.shared;
      break;
    }
  }
  h.gpus = std::move(gpus);
  h.simulated = inv.simulated;
  h.gpuProvider = inv.gpuProvider;
  h.agentVersion = inv.agentVersion;
  h.cgroup = inv.cgroup;
  h.runAsOwner = inv.runAsOwner;
  h.address = inv.address;
  h.images = inv.images;
}

nlohmann::json toJson(const Inventory& inv) {
  return {{"hostname", inv.hostname},
          {"cpus", inv.cpus},
          {"memory_mib", inv.memoryMib},
          {"gpus", gpusJson(inv.gpus)},
          {"gpu_provider", inv.gpuProvider},
          {"simulated", inv.simulated},
          {"agent_version", inv.agentVersion},
          {"cgroup", inv.cgroup},
          {"run_as_owner", inv.runAsOwner},
          {"address", inv.address},
          {"images", inv.images}};
}

Result<Inventory> inventoryFromJson(const nlohmann::json& j) {
  // Also what a host sends to join (POST /api/v1/hosts/join), not only inside a hello.
  if (!fractionsWithinIntRange(j))
    return Status::InvalidArgument(
        "bad inventory: a number is out of range (a fraction past 2^31)");
  return guarded("inventory", [&]() -> Result<Inventory> {
    Inventory inv;
    inv.hostname = j.at("hostname").get<std::string>();
    inv.cpus = j.at("cpus").get<int>();
    inv.memoryMib = j.at("memory_mib").get<int64_t>();
    for (const auto& g : j.at("gpus")) inv.gpus.push_back(gpuFromJson(g));
    inv.gpuProvider = j.value("gpu_provider", "");
    inv.simulated = j.value("simulated", false);
    inv.agentVersion = j.value("agent_version", "");
    inv.cgroup = j.value("cgroup", "none");
    inv.runAsOwner = j.value("run_as_owner", "");
    inv.address = j.value("address", "");
    inv.images = j.value("images", false);
    ALLOT_RETURN_IF_ERROR(validateInventory(inv));
    return inv;
  });
}

bool isHostAddress(const std::string& s) {
  in6_addr buf;
  if (inet_pton(AF_INET, s.c_str(), &buf) == 1 || inet_pton(AF_INET6, s.c_str(), &buf) == 1)
    return true;
  if (s.empty() || s.size() > 253) return false;
  size_t label = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == '.') {
      if (label == 0 || label > 63 || s[i - 1] == '-' || s[i - label] == '-') return false;
      label = 0;
    } else if (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '-') {
      ++label;
    } else {
      return false;
    }
  }
  return true;
}

Status validateInventory(const Inventory& inv) {
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument("inventory: " + why, "inventory");
  };
  auto tooLong = [](const std::string& s) { return s.size() > kMaxInventoryText; };
  if (tooLong(inv.hostname) || tooLong(inv.gpuProvider) || tooLong(inv.agentVersion) ||
      tooLong(inv.cgroup) || tooLong(inv.runAsOwner))
    return bad("a name or version is longer than " + std::to_string(kMaxInventoryText) + " bytes");
  if (!inv.address.empty() && !isHostAddress(inv.address))
    return bad("address: '" + inv.address + "' is not an IP address or a DNS name");
  if (inv.cpus < 0 || inv.cpus > kMaxHostCpus)
    return bad("cpus: " + std::to_string(inv.cpus) + " is outside 0.." +
               std::to_string(kMaxHostCpus));
  if (inv.memoryMib < 0 || inv.memoryMib > kMaxHostMemoryMib)
    return bad("memory_mib: " + std::to_string(inv.memoryMib) + " is outside 0.." +
               std::to_string(kMaxHostMemoryMib));
  if (inv.gpus.size() > static_cast<size_t>(kMaxHostGpus))
    return bad("gpus: " + std::to_string(inv.gpus.size()) + " GPUs, more than the " +
               std::to_string(kMaxHostGpus) + " a host may have");
  std::set<int> indexes;
  std::set<std::string> uuids;
  for (const auto& g : inv.gpus) {
    const std::string which = "gpus[" + std::to_string(g.index) + "]";
    if (g.index < 0 || g.index >= kMaxHostGpus)
      return bad("gpus: index " + std::to_string(g.index) + " is outside 0.." +
                 std::to_string(kMaxHostGpus - 1));
    if (!indexes.insert(g.index).second)
      return bad("gpus: index " + std::to_string(g.index) + " appears twice");
    if (!g.uuid.empty() && !uuids.insert(g.uuid).second) return bad(which + ": uuid appears twice");
    if (g.minor < 0 || g.minor > 4095) return bad(which + ": minor outside 0..4095");
    if (g.memoryMib < 0 || g.memoryMib > kMaxGpuMemoryMib)
      return bad(which + ": memory_mib outside 0.." + std::to_string(kMaxGpuMemoryMib));
    if (tooLong(g.uuid) || tooLong(g.model) || tooLong(g.driverVersion) || tooLong(g.cudaVersion))
      return bad(which + ": a name or version is longer than " + std::to_string(kMaxInventoryText) +
                 " bytes");
    if (g.numaNode < -1 || g.numaNode > 1024 || g.nvlinkDomain < -1 ||
        g.nvlinkDomain > kMaxHostGpus || g.pcieSwitch < -1 || g.pcieSwitch > 1024)
      return bad(which + ": topology out of range");
  }
  return Status::Ok();
}

nlohmann::json toJson(const RunAs& r) {
  return {
      {"user", r.user}, {"uid", r.uid}, {"gid", r.gid}, {"team", r.team}, {"team_gid", r.teamGid}};
}

Result<RunAs> runAsFromJson(const nlohmann::json& j) {
  return guarded("run_as", [&]() -> Result<RunAs> {
    RunAs r;
    r.user = j.at("user").get<std::string>();
    r.uid = j.at("uid").get<int64_t>();
    r.gid = j.at("gid").get<int64_t>();
    r.team = j.value("team", "");
    r.teamGid = j.value("team_gid", int64_t{-1});
    return r;
  });
}

nlohmann::json toJson(const DesiredJob& d) {
  nlohmann::json j = {{"id", d.id},
                      {"command", d.command},
                      {"env", d.env},
                      {"gpu_indices", d.gpuIndices},
                      {"gpu_uuids", d.gpuUuids},
                      {"gpu_minors", d.gpuMinors},
                      {"cpu_millis", d.cpuMillis},
                      {"memory_mib", d.memoryMib},
                      {"cancel", d.cancel},
                      {"grace_ms", d.graceMs},
                      {"log_offset", d.logOffset}};
  // No command key at all: an agent older than deferral refuses the entry rather than start
  // the job with an empty command.
  if (d.deferred) {
    j["deferred"] = true;
    j.erase("command");
  }
  if (d.runAs) j["run_as"] = toJson(*d.runAs);
  if (d.chooseMasterPort) j["choose_master_port"] = true;
  if (!d.workdir.empty()) j["workdir"] = d.workdir;
  if (!d.image.empty()) j["image"] = d.image;
  if (d.registryAuth)
    j["registry_auth"] = {{"registry", d.registryAuth->registry},
                          {"username", d.registryAuth->username},
                          {"password", d.registryAuth->password}};
  if (d.session)
    j["session"] = {{"app", d.session->app},
                    {"storage", d.session->storage},
                    {"ssh_keys", d.session->sshKeys},
                    {"user", d.session->user},
                    {"shared_root", d.session->sharedRoot}};
  return j;
}

Result<DesiredJob> desiredJobFromJson(const nlohmann::json& j) {
  return guarded("desired job", [&]() -> Result<DesiredJob> {
    DesiredJob d;
    d.id = j.at("id").get<int64_t>();
    d.deferred = j.value("deferred", false);
    d.command =
        d.deferred ? std::vector<std::string>{} : j.at("command").get<std::vector<std::string>>();
    d.env = j.value("env", std::map<std::string, std::string>{});
    d.gpuIndices = j.value("gpu_indices", std::vector<int>{});
    d.gpuUuids = j.value("gpu_uuids", std::vector<std::string>{});
    d.gpuMinors = j.value("gpu_minors", std::vector<int>{});
    d.cpuMillis = j.value("cpu_millis", 0);
    d.memoryMib = j.value("memory_mib", int64_t{0});
    d.cancel = j.value("cancel", false);
    d.graceMs = j.value("grace_ms", int64_t{10'000});
    d.logOffset = j.value("log_offset", int64_t{0});
    d.chooseMasterPort = j.value("choose_master_port", false);
    d.workdir = j.value("workdir", "");
    d.image = j.value("image", "");
    if (const nlohmann::json* a = objectAt(j, "registry_auth"))
      d.registryAuth = DesiredJob::RegistryAuth{a->at("registry").get<std::string>(),
                                                a->at("username").get<std::string>(),
                                                a->at("password").get<std::string>()};
    if (j.contains("run_as")) {
      auto r = runAsFromJson(j.at("run_as"));
      if (!r.ok()) return r.status();
      d.runAs = *r;
    }
    if (const nlohmann::json* s = objectAt(j, "session")) {
      d.session = DesiredSession{s->at("app").get<std::string>(), s->value("storage", "scratch"),
                                 s->value("ssh_keys", std::vector<std::string>{}),
                                 s->value("user", ""), s->value("shared_root", "")};
    }
    return d;
  });
}

nlohmann::json toJson(const ActualJob& a) {
  nlohmann::json j = {{"id", a.id},
                      {"state", actualStateName(a.state)},
                      {"pid", a.pid},
                      {"started_ms", a.startedAt},
                      {"finished_ms", a.finishedAt},
                      {"message", a.message}};
  j["exit_code"] = valueOrNull(a.exitCode);
  j["signal"] = valueOrNull(a.signal);
  if (a.session) j["session"] = toJson(*a.session);
  if (a.masterPort != 0) j["master_port"] = a.masterPort;
  if (!a.imageDigest.empty()) j["image_digest"] = a.imageDigest;
  if (!a.imageMinCuda.empty()) j["image_min_cuda"] = a.imageMinCuda;
  if (a.state == ActualState::kPulling) {
    j["pull_bytes"] = a.pullBytes;
    j["pull_total"] = a.pullTotal;
  }
  return j;
}

nlohmann::json toJson(const ActualSession& s) {
  return {{"token", s.token},
          {"ready", s.ready},
          {"connections", s.connections},
          {"busy_kernels", s.busyKernels},
          {"last_activity_ms", s.lastActivity},
          {"activity_known", s.activityKnown},
          {"ssh_user", s.sshUser},
          {"ssh_host_key", s.sshHostKey},
          {"ssh_direct", s.sshDirect},
          {"storage_path", s.storagePath},
          {"storage_bytes", s.storageBytes}};
}

Result<ActualSession> actualSessionFromJson(const nlohmann::json& j) {
  return guarded("session status", [&]() -> Result<ActualSession> {
    ActualSession s;
    s.token = j.value("token", "");
    s.ready = j.value("ready", false);
    s.connections = j.value("connections", 0);
    s.busyKernels = j.value("busy_kernels", 0);
    s.lastActivity = j.value("last_activity_ms", TimeMs{0});
    s.activityKnown = j.value("activity_known", false);
    s.sshUser = j.value("ssh_user", "");
    s.sshHostKey = j.value("ssh_host_key", "");
    s.sshDirect = j.value("ssh_direct", "");
    s.storagePath = j.value("storage_path", "");
    s.storageBytes = j.value("storage_bytes", int64_t{-1});
    return s;
  });
}

Result<ActualJob> actualJobFromJson(const nlohmann::json& j) {
  return guarded("job status", [&]() -> Result<ActualJob> {
    ActualJob a;
    a.id = j.at("id").get<int64_t>();
    auto st = j.at("state").get<std::string>();
    auto state = parseIn(kActualStates, st);
    if (!state) return Status::InvalidArgument("bad job status: unknown state '" + st + "'");
    a.state = *state;
    a.pid = j.value("pid", 0);
    a.exitCode = readOptional<int>(j, "exit_code");
    a.signal = readOptional<int>(j, "signal");
    a.startedAt = j.value("started_ms", TimeMs{0});
    a.finishedAt = j.value("finished_ms", TimeMs{0});
    a.message = j.value("message", "");
    a.masterPort = j.value("master_port", 0);
    if (a.masterPort < 0 || a.masterPort > 65535)
      return Status::InvalidArgument("bad job status: master_port outside 0..65535");
    a.imageDigest = j.value("image_digest", "");
    if (!a.imageDigest.empty() && !isSha256Digest(a.imageDigest))
      return Status::InvalidArgument("bad job status: image_digest is not a sha256 digest");
    a.imageMinCuda = j.value("image_min_cuda", "");
    if (!a.imageMinCuda.empty() && !isCudaRequirement(a.imageMinCuda))
      return Status::InvalidArgument("bad job status: image_min_cuda is not a version like 12.1");
    a.pullBytes = j.value("pull_bytes", int64_t{0});
    a.pullTotal = j.value("pull_total", int64_t{0});
    if (a.pullBytes < 0 || a.pullTotal < 0)
      return Status::InvalidArgument("bad job status: pull_bytes and pull_total must be >= 0");
    ALLOT_RETURN_IF_ERROR(decodeObjectAt(j, "session", actualSessionFromJson, a.session));
    return a;
  });
}

namespace {
template <typename T>
void putOptional(nlohmann::json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}
template <typename T>
void getOptional(const nlohmann::json& j, const char* key, std::optional<T>& v) {
  if (auto got = readOptional<T>(j, key)) v = *got;
}
}  // namespace

nlohmann::json toJson(const GpuSample& s) {
  nlohmann::json j = {{"index", s.index}, {"pids", s.pids}};
  putOptional(j, "utilization_pct", s.utilizationPct);
  putOptional(j, "memory_used_mib", s.memoryUsedMib);
  putOptional(j, "temperature_c", s.temperatureC);
  putOptional(j, "power_w", s.powerW);
  putOptional(j, "sm_clock_mhz", s.smClockMhz);
  putOptional(j, "ecc_corrected", s.eccCorrected);
  putOptional(j, "ecc_uncorrected", s.eccUncorrected);
  return j;
}

Result<GpuSample> gpuSampleFromJson(const nlohmann::json& j) {
  return guarded("GPU sample", [&]() -> Result<GpuSample> {
    GpuSample s;
    s.index = j.at("index").get<int>();
    getOptional(j, "utilization_pct", s.utilizationPct);
    getOptional(j, "memory_used_mib", s.memoryUsedMib);
    getOptional(j, "temperature_c", s.temperatureC);
    getOptional(j, "power_w", s.powerW);
    getOptional(j, "sm_clock_mhz", s.smClockMhz);
    getOptional(j, "ecc_corrected", s.eccCorrected);
    getOptional(j, "ecc_uncorrected", s.eccUncorrected);
    s.pids = j.value("pids", std::vector<int>{});
    if (s.utilizationPct && (*s.utilizationPct < 0 || *s.utilizationPct > 100))
      return Status::InvalidArgument("bad GPU sample: utilization_pct out of 0..100");
    return s;
  });
}

nlohmann::json toJson(const Telemetry& t) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& s : t.gpus) gpus.push_back(toJson(s));
  return {{"type", "telemetry"},
          {"host", t.host},
          {"at_ms", t.at},
          {"interval_ms", t.intervalMs},
          {"gpus", gpus}};
}

Result<Telemetry> telemetryFromJson(const nlohmann::json& j) {
  return guarded("telemetry", [&]() -> Result<Telemetry> {
    Telemetry t;
    t.host = j.at("host").get<std::string>();
    t.at = j.at("at_ms").get<TimeMs>();
    t.intervalMs = j.at("interval_ms").get<int64_t>();
    if (t.intervalMs <= 0) return Status::InvalidArgument("bad telemetry: interval_ms <= 0");
    for (const auto& g : j.at("gpus")) {
      auto s = gpuSampleFromJson(g);
      if (!s.ok()) return s.status();
      t.gpus.push_back(*s);
    }
    return t;
  });
}

static nlohmann::json jobsArray(const std::vector<ActualJob>& jobs) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& a : jobs) arr.push_back(toJson(a));
  return arr;
}

std::string encodeHello(const Inventory& inv, const std::vector<ActualJob>& jobs,
                        int64_t refusedDesired) {
  return nlohmann::json{{"type", "hello"},
                        {"inventory", toJson(inv)},
                        {"jobs", jobsArray(jobs)},
                        {"refused_desired", refusedDesired}}
      .dump();
}

std::string encodeStatus(const std::vector<ActualJob>& jobs, int64_t refusedDesired) {
  return nlohmann::json{
      {"type", "status"}, {"jobs", jobsArray(jobs)}, {"refused_desired", refusedDesired}}
      .dump();
}

int64_t refusedDesiredOf(const nlohmann::json& msg) {
  const auto it = msg.find("refused_desired");
  if (it == msg.end() || !it->is_number_integer()) return 0;
  return std::max<int64_t>(0, it->get<int64_t>());
}

namespace {

// encodeDesired() through nlohmann::json: what the writer below must match byte for byte.
std::string encodeDesiredAsJson(const std::vector<DesiredJob>& jobs, int64_t heartbeatMs,
                                const std::optional<HostTask>& task, const ImageCommands& images,
                                const LogKeep& logKeep) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& d : jobs) arr.push_back(toJson(d));
  nlohmann::json out{{"type", "desired"}, {"jobs", arr}, {"heartbeat_ms", heartbeatMs}};
  if (task) out["task"] = toJson(*task);
  if (!images.empty()) out["images"] = toJson(images);
  if (logKeep.tail > 0) out["log_keep"] = {{"head", logKeep.head}, {"tail", logKeep.tail}};
  return out.dump();
}

// One job of a desired state, its keys in nlohmann's (sorted) order, as toJson(DesiredJob).
void writeDesiredJob(JsonWriter& w, const DesiredJob& d) {
  w.beginObject();
  w.boolean("cancel", d.cancel);
  if (d.chooseMasterPort) w.boolean("choose_master_port", true);
  if (!d.deferred) {
    w.strings("command", d.command);
  }
  w.number("cpu_millis", d.cpuMillis);
  if (d.deferred) w.boolean("deferred", true);
  w.key("env");
  w.beginObject();
  for (const auto& [k, v] : d.env) {
    w.key(k);
    w.string(v);
  }
  w.endObject();
  w.numbers("gpu_indices", d.gpuIndices);
  w.numbers("gpu_minors", d.gpuMinors);
  w.strings("gpu_uuids", d.gpuUuids);
  w.number("grace_ms", d.graceMs);
  w.number("id", d.id);
  if (!d.image.empty()) w.string("image", d.image);
  w.number("log_offset", d.logOffset);
  w.number("memory_mib", d.memoryMib);
  if (d.registryAuth) {
    w.key("registry_auth");
    w.beginObject();
    w.string("password", d.registryAuth->password);
    w.string("registry", d.registryAuth->registry);
    w.string("username", d.registryAuth->username);
    w.endObject();
  }
  if (d.runAs) {
    w.key("run_as");
    w.beginObject();
    w.number("gid", d.runAs->gid);
    w.string("team", d.runAs->team);
    w.number("team_gid", d.runAs->teamGid);
    w.number("uid", d.runAs->uid);
    w.string("user", d.runAs->user);
    w.endObject();
  }
  if (d.session) {
    w.key("session");
    w.beginObject();
    w.string("app", d.session->app);
    w.string("shared_root", d.session->sharedRoot);
    w.strings("ssh_keys", d.session->sshKeys);
    w.string("storage", d.session->storage);
    w.string("user", d.session->user);
    w.endObject();
  }
  if (!d.workdir.empty()) w.string("workdir", d.workdir);
  w.endObject();
}

}  // namespace

std::string encodeDesired(const std::vector<DesiredJob>& jobs, int64_t heartbeatMs,
                          const std::optional<HostTask>& task, const ImageCommands& images,
                          const LogKeep& logKeep) {
  // Written directly: allotd encodes a host's whole desired state each time one of its jobs
  // changes, and building it as nlohmann::json first was a seventh of allotd's CPU under a
  // stream of short jobs. The rare parts (a host task, image commands) are dumped as before.
  std::string out;
  out.reserve(256 + jobs.size() * 512);
  JsonWriter w(out);
  w.beginObject();
  w.number("heartbeat_ms", heartbeatMs);
  if (!images.empty()) {
    w.key("images");
    w.raw(toJson(images).dump());
  }
  w.key("jobs");
  w.beginArray();
  for (const auto& d : jobs) {
    w.element();
    writeDesiredJob(w, d);
  }
  w.endArray();
  if (logKeep.tail > 0) {
    w.key("log_keep");
    w.beginObject();
    w.number("head", logKeep.head);
    w.number("tail", logKeep.tail);
    w.endObject();
  }
  if (task) {
    w.key("task");
    w.raw(toJson(*task).dump());
  }
  w.string("type", "desired");
  w.endObject();
  // A string that is not UTF-8 (nothing allotd accepts holds one): nlohmann's way, which says so.
  if (!w.ok()) return encodeDesiredAsJson(jobs, heartbeatMs, task, images, logKeep);
  return out;
}

Result<DesiredState> decodeDesired(const nlohmann::json& msg) {
  const auto type = msg.is_object() ? msg.find("type") : msg.end();
  if (type == msg.end() || !type->is_string() || type->get<std::string>() != "desired")
    return Status::InvalidArgument("not a desired-state message");
  if (!fractionsWithinIntRange(msg))
    return Status::InvalidArgument(
        "desired state: a number is out of range (a fraction past 2^31)");
  DesiredState out;
  const auto jobs = msg.find("jobs");
  if (jobs != msg.end() && !jobs->is_array())
    return Status::InvalidArgument("desired state: jobs is not an array");
  if (jobs != msg.end()) {
    for (size_t i = 0; i < jobs->size(); ++i) {
      auto d = desiredJobFromJson((*jobs)[i]);
      if (!d.ok())
        return Status::InvalidArgument("desired state: job entry " + std::to_string(i) + ": " +
                                       d.status().message());
      out.jobs.push_back(std::move(d).value());
    }
  }
  if (auto hb = msg.find("heartbeat_ms"); hb != msg.end()) {
    if (!hb->is_number_integer() || hb->get<int64_t>() <= 0)
      return Status::InvalidArgument("desired state: heartbeat_ms is not a positive integer");
    out.heartbeatMs = hb->get<int64_t>();
  }
  if (auto i = msg.find("images"); i != msg.end() && !i->is_null()) {
    auto images = imageCommandsFromJson(*i);
    if (!images.ok()) return Status::InvalidArgument("desired state: " + images.status().message());
    out.images = std::move(images).value();
  }
  if (auto k = msg.find("log_keep"); k != msg.end() && !k->is_null()) {
    auto bytes = [&](const char* field) -> int64_t {
      auto v = k->is_object() ? k->find(field) : k->end();
      return v != k->end() && v->is_number_integer() ? v->get<int64_t>() : -1;
    };
    const LogKeep keep{bytes("head"), bytes("tail")};
    if (keep.head < 0 || keep.tail <= 0)
      return Status::InvalidArgument(
          "desired state: log_keep is not {\"head\": N >= 0, \"tail\": N > 0}");
    out.logKeep = keep;
  }
  if (auto t = msg.find("task"); t != msg.end() && !t->is_null()) {
    auto task = hostTaskFromJson(*t);
    if (!task.ok())
      return Status::InvalidArgument("desired state: task: " + task.status().message());
    out.task = std::move(task).value();
  }
  return out;
}

nlohmann::json toJson(const UnixAccount& a) {
  return {{"name", a.name}, {"uid", a.uid}, {"gid", a.gid}, {"teams", a.teams}};
}

nlohmann::json toJson(const HookSpec& h) {
  nlohmann::json accounts = nlohmann::json::array();
  for (const auto& a : h.accounts) accounts.push_back(toJson(a));
  return {{"id", h.id},     {"profile", h.profile},      {"team", h.team},      {"kind", h.kind},
          {"path", h.path}, {"timeout_ms", h.timeoutMs}, {"accounts", accounts}};
}

Result<HookSpec> hookSpecFromJson(const nlohmann::json& j) {
  return guarded("hook", [&]() -> Result<HookSpec> {
    HookSpec h;
    h.id = j.at("id").get<int64_t>();
    h.profile = j.at("profile").get<std::string>();
    h.team = j.value("team", "");
    h.kind = j.at("kind").get<std::string>();
    h.path = j.at("path").get<std::string>();
    h.timeoutMs = j.at("timeout_ms").get<int64_t>();
    for (const auto& a : j.value("accounts", nlohmann::json::array())) {
      UnixAccount u;
      u.name = a.at("name").get<std::string>();
      u.uid = a.at("uid").get<int64_t>();
      u.gid = a.at("gid").get<int64_t>();
      u.teams = a.value("teams", std::map<std::string, int64_t>{});
      h.accounts.push_back(std::move(u));
    }
    if (h.kind != "playbook" && h.kind != "script")
      return Status::InvalidArgument("bad hook: kind must be playbook or script, got '" + h.kind +
                                     "'");
    if (h.timeoutMs <= 0) return Status::InvalidArgument("bad hook: timeout_ms <= 0");
    return h;
  });
}

nlohmann::json toJson(const HostTask& t) {
  nlohmann::json out{{"id", t.id}, {"purpose", t.purpose}};
  if (t.wipe) out["wipe"] = {{"home", t.wipe->home}};
  if (t.hook) out["hook"] = toJson(*t.hook);
  if (t.health) {
    const HealthStep& h = *t.health;
    out["health"] = {{"gpu_count", h.gpuCount},   {"gpu_models", h.gpuModels},
                     {"min_driver", h.minDriver}, {"min_free_disk_mib", h.minFreeDiskMib},
                     {"burn_in", h.burnIn},       {"burn_in_ms", h.burnInMs}};
  }
  return out;
}

Result<HostTask> hostTaskFromJson(const nlohmann::json& j) {
  return guarded("host task", [&]() -> Result<HostTask> {
    HostTask t;
    t.id = j.at("id").get<int64_t>();
    t.purpose = j.value("purpose", "");
    if (const nlohmann::json* w = objectAt(j, "wipe")) t.wipe = WipeStep{w->value("home", false)};
    ALLOT_RETURN_IF_ERROR(decodeObjectAt(j, "hook", hookSpecFromJson, t.hook));
    if (const nlohmann::json* h = objectAt(j, "health")) {
      HealthStep s;
      s.gpuCount = h->value("gpu_count", -1);
      s.gpuModels = h->value("gpu_models", std::vector<std::string>{});
      s.minDriver = h->value("min_driver", "");
      s.minFreeDiskMib = h->value("min_free_disk_mib", int64_t{0});
      s.burnIn = h->value("burn_in", false);
      s.burnInMs = h->value("burn_in_ms", int64_t{3000});
      t.health = s;
    }
    return t;
  });
}

nlohmann::json toJson(const HookResult& r) {
  return {{"id", r.id},
          {"ok", r.ok},
          {"exit_code", r.exitCode},
          {"timed_out", r.timedOut},
          {"output", r.output}};
}

Result<HookResult> hookResultFromJson(const nlohmann::json& j) {
  return guarded("hook result", [&]() -> Result<HookResult> {
    HookResult r;
    r.id = j.at("id").get<int64_t>();
    r.ok = j.at("ok").get<bool>();
    r.exitCode = j.value("exit_code", -1);
    r.timedOut = j.value("timed_out", false);
    r.output = j.value("output", "");
    return r;
  });
}

nlohmann::json toJson(const HealthReport& r) {
  return {{"problems", r.problems},
          {"gpu_count", r.gpuCount},
          {"gpu_models", r.gpuModels},
          {"driver_version", r.driverVersion},
          {"cuda_version", r.cudaVersion},
          {"free_disk_mib", r.freeDiskMib},
          {"burn_in", r.burnIn}};
}

Result<HealthReport> healthReportFromJson(const nlohmann::json& j) {
  return guarded("health report", [&]() -> Result<HealthReport> {
    HealthReport r;
    r.problems = j.value("problems", std::vector<std::string>{});
    r.gpuCount = j.value("gpu_count", 0);
    r.gpuModels = j.value("gpu_models", std::vector<std::string>{});
    r.driverVersion = j.value("driver_version", "");
    r.cudaVersion = j.value("cuda_version", "");
    r.freeDiskMib = j.value("free_disk_mib", int64_t{-1});
    r.burnIn = j.value("burn_in", "");
    return r;
  });
}

std::string encodeTaskResult(const HostTaskResult& r) {
  nlohmann::json out{{"type", "task_result"},       {"id", r.id},         {"ok", r.ok},
                     {"failed_step", r.failedStep}, {"reason", r.reason}, {"output", r.output}};
  if (r.hook) out["hook"] = toJson(*r.hook);
  if (r.health) out["health"] = toJson(*r.health);
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<HostTaskResult> taskResultFromJson(const nlohmann::json& j) {
  return guarded("task result", [&]() -> Result<HostTaskResult> {
    HostTaskResult r;
    r.id = j.at("id").get<int64_t>();
    r.ok = j.at("ok").get<bool>();
    r.failedStep = j.value("failed_step", "");
    r.reason = j.value("reason", "");
    r.output = j.value("output", "");
    ALLOT_RETURN_IF_ERROR(decodeObjectAt(j, "hook", hookResultFromJson, r.hook));
    ALLOT_RETURN_IF_ERROR(decodeObjectAt(j, "health", healthReportFromJson, r.health));
    return r;
  });
}

std::string encodeTaskOutput(const TaskOutput& o) {
  return nlohmann::json{
      {"type", "task_output"}, {"id", o.id}, {"offset", o.offset}, {"data", o.data}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<TaskOutput> taskOutputFromJson(const nlohmann::json& j) {
  return guarded("task output", [&]() -> Result<TaskOutput> {
    TaskOutput o;
    o.id = j.at("id").get<int64_t>();
    o.offset = j.at("offset").get<int64_t>();
    o.data = j.at("data").get<std::string>();
    return o;
  });
}

std::string encodeLogChunk(const LogChunk& c) {
  std::string out = nlohmann::json{{"type", "log"}, {"job", c.job}, {"offset", c.offset}}.dump();
  out += '\n';
  out += c.data;
  return out;
}

Result<LogChunk> decodeLogChunk(const std::string& frame) {
  auto nl = frame.find('\n');
  if (nl == std::string::npos) return Status::InvalidArgument("log frame without header line");
  return guarded("log frame", [&]() -> Result<LogChunk> {
    auto h = parseBoundedJson(std::string_view(frame).substr(0, nl));
    if (!h.is_object() || !fractionsWithinIntRange(h))
      return Status::InvalidArgument("bad log frame: malformed header");
    LogChunk c;
    c.job = h.at("job").get<int64_t>();
    c.offset = h.at("offset").get<int64_t>();
    if (c.job <= 0) return Status::InvalidArgument("bad log frame: job must be positive");
    if (c.offset < 0) return Status::InvalidArgument("bad log frame: negative offset");
    c.data = frame.substr(nl + 1);
    return c;
  });
}

}  // namespace allot::model
