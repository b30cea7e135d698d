#pragma once
// Domain values shared by every module: plain structs, no behaviour beyond small helpers.
// Names (teams, users, projects, hosts) are the ids people type; jobs get a number.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"

namespace allot::model {

enum class Role { kMember, kPlatformAdmin };
const char* roleName(Role r);
std::optional<Role> parseRole(const std::string& s);

struct Team {
  std::string name;
  TimeMs createdAt = 0;
};

struct User {
  std::string name;
  std::string team;  // empty for a platform admin that belongs to no team
  Role role = Role::kMember;
  TimeMs createdAt = 0;
};

// An API credential. The secret is shown once; the store keeps only its hash.
struct ApiToken {
  std::string id;     // public part, "tok-<n>"
  std::string owner;  // user name, or "host:<name>" for a host credential
  std::string hash;
  TimeMs createdAt = 0;
  TimeMs expiresAt = 0;  // 0 = never
};

struct Project {
  std::string name;
  std::string team;
  TimeMs createdAt = 0;
};

// An admin-made token that lets agents join. Reusable until it expires, like kubeadm's.
struct JoinToken {
  std::string id;
  std::string hash;
  std::string createdBy;
  TimeMs createdAt = 0;
  TimeMs expiresAt = 0;
};

struct Gpu {
  int index = 0;
  std::string uuid;
  int minor = 0;
  std::string model;
  int64_t memoryMib = 0;
  int numaNode = -1;
  std::string driverVersion;
  std::string cudaVersion;
  // Topology, -1 when unknown or shared with no other GPU: GPUs of a host with the same
  // nvlinkDomain are joined by NVLink (directly or through NVSwitches); the same pcieSwitch sit
  // under one PCIe switch. Last, not beside numaNode, so that brace-initialised Gpus elsewhere
  // (tests write {index, uuid, minor, model, memory, numa, driver, cuda}) keep their meaning.
  int nvlinkDomain = -1;
  int pcieSwitch = -1;
};

enum class HostState { kOnline, kUnreachable };
const char* hostStateName(HostState s);

struct Host {
  std::string name;
  HostState state = HostState::kUnreachable;
  bool simulated = false;   // GPUs come from the simulated provider, not NVML
  std::string gpuProvider;  // "nvml" or "simulated"
  int cpus = 0;
  int64_t memoryMib = 0;
  std::vector<Gpu> gpus;
  std::string agentVersion;
  std::string cgroup;  // what confinement the host offers: "v1", "v2", "none"
  TimeMs joinedAt = 0;
  TimeMs lastSeenAt = 0;        // last message from its agent
  TimeMs unreachableSince = 0;  // 0 while online
};

// kPreempted: stopped to give its GPUs back to a team that was guaranteed them, and not requeued
// because it was not marked preemptible.
enum class JobState {
  kQueued,
  kScheduled,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kLost,
  kPreempted
};
const char* jobStateName(JobState s);
std::optional<JobState> parseJobState(const std::string& s);
bool isTerminal(JobState s);

struct Job {
  int64_t id = 0;
  std::string name;
  std::string team;
  std::string project;
  std::string user;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  int gpus = 0;
  std::string gpuModel;   // empty = any model
  int cpuMillis = 0;      // CPU limit in millicores; 0 = unlimited
  int64_t memoryMib = 0;  // memory limit; 0 = unlimited
  int priority = 0;       // higher goes first; lower is preempted first
  bool preemptible = false;  // requeued (rather than stopped for good) when preempted
  JobState state = JobState::kQueued;
  std::string reason;  // why it waits, or why it ended the way it did
  std::string host;
  std::vector<int> gpuIndices;
  std::vector<std::string> gpuUuids;
  std::optional<int> exitCode;
  std::optional<int> signal;
  bool cancelRequested = false;
  // Preemption: chosen as a victim, it is being stopped (SIGTERM, then kill after the grace);
  // when it has stopped it is requeued if preemptible, otherwise it ends as preempted.
  bool evicting = false;
  TimeMs evictingSince = 0;
  std::string evictedFor;  // "reclaimed by team ml for job 42"
  int preemptions = 0;     // how many times it was preempted and requeued
  TimeMs submittedAt = 0;
  TimeMs scheduledAt = 0;
  TimeMs startedAt = 0;
  TimeMs finishedAt = 0;
};

}  // namespace allot::model
