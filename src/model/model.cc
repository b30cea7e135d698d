#include "model/model.h"

namespace allot::model {

const char* roleName(Role r) {
  switch (r) {
    case Role::kViewer:
      return "viewer";
    case Role::kPlatformAdmin:
      return "platform-admin";
    case Role::kTeamAdmin:
      return "team-admin";
    case Role::kMember:
      return "member";
  }
  return "member";
}

std::optional<Role> parseRole(const std::string& s) {
  for (auto r : {Role::kViewer, Role::kMember, Role::kTeamAdmin, Role::kPlatformAdmin}) {
    if (s == roleName(r)) return r;
  }
  return std::nullopt;
}

const char* userKindName(UserKind k) { return k == UserKind::kService ? "service" : "human"; }
const char* userSourceName(UserSource s) { return s == UserSource::kLdap ? "ldap" : "local"; }

std::string authorizedKeysLine(const SshKey& k) {
  return k.type + " " + k.blob + (k.comment.empty() ? "" : " " + k.comment);
}

const char* tokenKindName(TokenKind k) {
  switch (k) {
    case TokenKind::kSession:
      return "session";
    case TokenKind::kHost:
      return "host";
    case TokenKind::kApi:
      return "api";
  }
  return "api";
}

const char* hostStateName(HostState s) {
  return s == HostState::kOnline ? "online" : "unreachable";
}

const char* adminStateName(AdminState s) {
  switch (s) {
    case AdminState::kAvailable:
      return "available";
    case AdminState::kDraining:
      return "draining";
    case AdminState::kMaintenance:
      return "maintenance";
    case AdminState::kFailed:
      return "failed";
    case AdminState::kRetired:
      return "retired";
    case AdminState::kReprovisioning:
      return "reprovisioning";
    case AdminState::kRegistering:
      return "registering";
    case AdminState::kCommissioning:
      return "commissioning";
  }
  return "available";
}

std::optional<AdminState> parseAdminState(const std::string& s) {
  for (auto a : {AdminState::kAvailable, AdminState::kDraining, AdminState::kMaintenance,
                 AdminState::kFailed, AdminState::kRetired, AdminState::kReprovisioning,
                 AdminState::kRegistering, AdminState::kCommissioning}) {
    if (s == adminStateName(a)) return a;
  }
  return std::nullopt;
}

const char* ledgerKindName(LedgerKind k) {
  switch (k) {
    case LedgerKind::kOpen:
      return "open";
    case LedgerKind::kClose:
      return "close";
    case LedgerKind::kCorrect:
      return "correct";
  }
  return "?";
}

std::optional<LedgerKind> parseLedgerKind(const std::string& s) {
  for (auto k : {LedgerKind::kOpen, LedgerKind::kClose, LedgerKind::kCorrect}) {
    if (s == ledgerKindName(k)) return k;
  }
  return std::nullopt;
}

const char* idleActionName(IdleAction a) {
  return a == IdleAction::kReclaim ? "reclaim" : "notify";
}

std::optional<IdleAction> parseIdleAction(const std::string& s) {
  for (auto a : {IdleAction::kNotify, IdleAction::kReclaim}) {
    if (s == idleActionName(a)) return a;
  }
  return std::nullopt;
}

const char* eventKindName(EventKind k) {
  switch (k) {
    case EventKind::kAllocationIdle:
      return "allocation_idle";
    case EventKind::kAllocationBusyAgain:
      return "allocation_busy_again";
    case EventKind::kAllocationReclaimed:
      return "allocation_reclaimed";
    case EventKind::kLeaseChanged:
      return "lease_changed";
    case EventKind::kLeasePreemptionNotice:
      return "lease_preemption_notice";
    case EventKind::kSchedulerError:
      return "scheduler_error";
  }
  return "?";
}

std::optional<EventKind> parseEventKind(const std::string& s) {
  for (auto k : {EventKind::kAllocationIdle, EventKind::kAllocationBusyAgain,
                 EventKind::kAllocationReclaimed, EventKind::kLeaseChanged,
                 EventKind::kLeasePreemptionNotice, EventKind::kSchedulerError}) {
    if (s == eventKindName(k)) return k;
  }
  return std::nullopt;
}

const char* leaseStateName(LeaseState s) {
  switch (s) {
    case LeaseState::kRequested:
      return "requested";
    case LeaseState::kApproved:
      return "approved";
    case LeaseState::kActive:
      return "active";
    case LeaseState::kEnded:
      return "ended";
    case LeaseState::kRejected:
      return "rejected";
    case LeaseState::kCancelled:
      return "cancelled";
  }
  return "?";
}

std::optional<LeaseState> parseLeaseState(const std::string& s) {
  for (auto k : {LeaseState::kRequested, LeaseState::kApproved, LeaseState::kActive,
                 LeaseState::kEnded, LeaseState::kRejected, LeaseState::kCancelled}) {
    if (s == leaseStateName(k)) return k;
  }
  return std::nullopt;
}

const char* jobStateName(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
    case JobState::kScheduled:
      return "scheduled";
    case JobState::kRunning:
      return "running";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
    case JobState::kLost:
      return "lost";
    case JobState::kPreempted:
      return "preempted";
  }
  return "unknown";
}

std::optional<JobState> parseJobState(const std::string& s) {
  for (auto st : {JobState::kQueued, JobState::kScheduled, JobState::kRunning, JobState::kSucceeded,
                  JobState::kFailed, JobState::kCancelled, JobState::kLost, JobState::kPreempted}) {
    if (s == jobStateName(st)) return st;
  }
  return std::nullopt;
}

bool isTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled ||
         s == JobState::kLost || s == JobState::kPreempted;
}

const char* rankStateName(RankState s) {
  switch (s) {
    case RankState::kPending:
      return "pending";
    case RankState::kRunning:
      return "running";
    case RankState::kExited:
      return "exited";
    case RankState::kFailedToStart:
      return "failed_to_start";
    case RankState::kLost:
      return "lost";
  }
  return "pending";
}

std::optional<RankState> parseRankState(const std::string& s) {
  for (auto st : {RankState::kPending, RankState::kRunning, RankState::kExited,
                  RankState::kFailedToStart, RankState::kLost}) {
    if (s == rankStateName(st)) return st;
  }
  return std::nullopt;
}

int rankOn(const Job& job, const std::string& host) {
  if (job.ranks.empty()) return !job.host.empty() && job.host == host ? 0 : -1;
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    if (job.ranks[r].host == host) return static_cast<int>(r);
  }
  return -1;
}

std::vector<std::string> rankHosts(const Job& job) {
  std::vector<std::string> out;
  if (job.ranks.empty()) {
    if (!job.host.empty()) out.push_back(job.host);
    return out;
  }
  for (const auto& r : job.ranks) out.push_back(r.host);
  return out;
}

std::string hostDriverVersion(const Host& h) {
  for (const auto& g : h.gpus)
    if (!g.driverVersion.empty()) return g.driverVersion;
  return "";
}

std::string hostCudaVersion(const Host& h) {
  for (const auto& g : h.gpus)
    if (!g.cudaVersion.empty()) return g.cudaVersion;
  return "";
}

const char* upgradeStateName(UpgradeState s) {
  switch (s) {
    case UpgradeState::kRunning:
      return "running";
    case UpgradeState::kSucceeded:
      return "succeeded";
    case UpgradeState::kStopped:
      return "stopped";
  }
  return "running";
}

std::optional<UpgradeState> parseUpgradeState(const std::string& s) {
  for (auto v : {UpgradeState::kRunning, UpgradeState::kSucceeded, UpgradeState::kStopped})
    if (s == upgradeStateName(v)) return v;
  return std::nullopt;
}

const char* upgradeHostStateName(UpgradeHostState s) {
  switch (s) {
    case UpgradeHostState::kPending:
      return "pending";
    case UpgradeHostState::kRunning:
      return "running";
    case UpgradeHostState::kDone:
      return "done";
    case UpgradeHostState::kFailed:
      return "failed";
    case UpgradeHostState::kSkipped:
      return "skipped";
  }
  return "pending";
}

std::optional<UpgradeHostState> parseUpgradeHostState(const std::string& s) {
  for (auto v : {UpgradeHostState::kPending, UpgradeHostState::kRunning, UpgradeHostState::kDone,
                 UpgradeHostState::kFailed, UpgradeHostState::kSkipped})
    if (s == upgradeHostStateName(v)) return v;
  return std::nullopt;
}

}  // namespace allot::model
