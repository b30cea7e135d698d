#include "model/model.h"

#include "model/enum_names.h"

namespace allot::model {
namespace {

constexpr EnumName<Role> kRoles[] = {{Role::kViewer, "viewer"},
                                     {Role::kMember, "member"},
                                     {Role::kTeamAdmin, "team-admin"},
                                     {Role::kPlatformAdmin, "platform-admin"}};

constexpr EnumName<TokenKind> kTokenKinds[] = {
    {TokenKind::kSession, "session"}, {TokenKind::kHost, "host"}, {TokenKind::kApi, "api"}};

constexpr EnumName<AdminState> kAdminStates[] = {
    {AdminState::kAvailable, "available"},     {AdminState::kDraining, "draining"},
    {AdminState::kMaintenance, "maintenance"}, {AdminState::kFailed, "failed"},
    {AdminState::kRetired, "retired"},         {AdminState::kReprovisioning, "reprovisioning"},
    {AdminState::kRegistering, "registering"}, {AdminState::kCommissioning, "commissioning"}};

constexpr EnumName<LedgerKind> kLedgerKinds[] = {
    {LedgerKind::kOpen, "open"}, {LedgerKind::kClose, "close"}, {LedgerKind::kCorrect, "correct"}};

constexpr EnumName<IdleAction> kIdleActions[] = {{IdleAction::kNotify, "notify"},
                                                 {IdleAction::kReclaim, "reclaim"}};

constexpr EnumName<EventKind> kEventKinds[] = {
    {EventKind::kAllocationIdle, "allocation_idle"},
    {EventKind::kAllocationBusyAgain, "allocation_busy_again"},
    {EventKind::kAllocationReclaimed, "allocation_reclaimed"},
    {EventKind::kLeaseChanged, "lease_changed"},
    {EventKind::kLeasePreemptionNotice, "lease_preemption_notice"},
    {EventKind::kSchedulerError, "scheduler_error"}};

constexpr EnumName<LeaseState> kLeaseStates[] = {
    {LeaseState::kRequested, "requested"}, {LeaseState::kApproved, "approved"},
    {LeaseState::kActive, "active"},       {LeaseState::kEnded, "ended"},
    {LeaseState::kRejected, "rejected"},   {LeaseState::kCancelled, "cancelled"}};

constexpr EnumName<JobState> kJobStates[] = {
    {JobState::kQueued, "queued"},   {JobState::kScheduled, "scheduled"},
    {JobState::kPulling, "pulling"},
    {JobState::kRunning, "running"}, {JobState::kSucceeded, "succeeded"},
    {JobState::kFailed, "failed"},   {JobState::kCancelled, "cancelled"},
    {JobState::kLost, "lost"},       {JobState::kPreempted, "preempted"}};

constexpr EnumName<RankState> kRankStates[] = {{RankState::kPending, "pending"},
                                               {RankState::kRunning, "running"},
                                               {RankState::kExited, "exited"},
                                               {RankState::kFailedToStart, "failed_to_start"},
                                               {RankState::kLost, "lost"}};

constexpr EnumName<UpgradeState> kUpgradeStates[] = {{UpgradeState::kRunning, "running"},
                                                     {UpgradeState::kSucceeded, "succeeded"},
                                                     {UpgradeState::kStopped, "stopped"}};

constexpr EnumName<UpgradeHostState> kUpgradeHostStates[] = {
    {UpgradeHostState::kPending, "pending"},
    {UpgradeHostState::kRunning, "running"},
    {UpgradeHostState::kDone, "done"},
    {UpgradeHostState::kFailed, "failed"},
    {UpgradeHostState::kSkipped, "skipped"}};

}  // namespace

const char* roleName(Role r) { return nameIn(kRoles, r, "member"); }
std::optional<Role> parseRole(const std::string& s) { return parseIn(kRoles, s); }

const char* userKindName(UserKind k) { return k == UserKind::kService ? "service" : "human"; }
const char* userSourceName(UserSource s) { return s == UserSource::kLdap ? "ldap" : "local"; }

std::string authorizedKeysLine(const SshKey& k) {
  return k.type + " " + k.blob + (k.comment.empty() ? "" : " " + k.comment);
}

const char* tokenKindName(TokenKind k) { return nameIn(kTokenKinds, k, "api"); }

const char* hostStateName(HostState s) {
  return s == HostState::kOnline ? "online" : "unreachable";
}

const char* adminStateName(AdminState s) { return nameIn(kAdminStates, s, "available"); }
std::optional<AdminState> parseAdminState(const std::string& s) { return parseIn(kAdminStates, s); }

const char* ledgerKindName(LedgerKind k) { return nameIn(kLedgerKinds, k, "?"); }
std::optional<LedgerKind> parseLedgerKind(const std::string& s) { return parseIn(kLedgerKinds, s); }

const char* idleActionName(IdleAction a) { return nameIn(kIdleActions, a, "notify"); }
std::optional<IdleAction> parseIdleAction(const std::string& s) { return parseIn(kIdleActions, s); }

const char* eventKindName(EventKind k) { return nameIn(kEventKinds, k, "?"); }
std::optional<EventKind> parseEventKind(const std::string& s) { return parseIn(kEventKinds, s); }

const char* leaseStateName(LeaseState s) { return nameIn(kLeaseStates, s, "?"); }
std::optional<LeaseState> parseLeaseState(const std::string& s) { return parseIn(kLeaseStates, s); }

constexpr EnumName<DependencyKind> kDependencyKinds[] = {
    {DependencyKind::kAfterOk, "afterok"},
    {DependencyKind::kAfterNotOk, "afternotok"},
    {DependencyKind::kAfterAny, "afterany"}};
const char* dependencyKindName(DependencyKind k) { return nameIn(kDependencyKinds, k, "afterok"); }
std::optional<DependencyKind> parseDependencyKind(const std::string& s) {
  return parseIn(kDependencyKinds, s);
}
std::optional<bool> dependencyHolds(const Dependency& d, JobState state) {
  if (!isTerminal(state)) return std::nullopt;
  switch (d.kind) {
    case DependencyKind::kAfterOk:
      return state == JobState::kSucceeded;
    case DependencyKind::kAfterNotOk:
      return state != JobState::kSucceeded;
    case DependencyKind::kAfterAny:
      return true;
  }
  return false;
}

const char* jobStateName(JobState s) { return nameIn(kJobStates, s, "unknown"); }
std::optional<JobState> parseJobState(const std::string& s) { return parseIn(kJobStates, s); }

bool holdsGpus(JobState s) {
  return s == JobState::kScheduled || s == JobState::kPulling || s == JobState::kRunning;
}

bool isTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled ||
         s == JobState::kLost || s == JobState::kPreempted;
}

const char* rankStateName(RankState s) { return nameIn(kRankStates, s, "pending"); }
std::optional<RankState> parseRankState(const std::string& s) { return parseIn(kRankStates, s); }

const Rank& firstRank(const Job& job) {
  static const Rank kNotPlaced;
  return job.ranks.empty() ? kNotPlaced : job.ranks.front();
}

int rankOn(const Job& job, const std::string& host) {
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    if (job.ranks[r].host == host) return static_cast<int>(r);
  }
  return -1;
}

std::vector<std::string> rankHosts(const Job& job) {
  std::vector<std::string> out;
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

const char* upgradeStateName(UpgradeState s) { return nameIn(kUpgradeStates, s, "running"); }
std::optional<UpgradeState> parseUpgradeState(const std::string& s) {
  return parseIn(kUpgradeStates, s);
}

const char* upgradeHostStateName(UpgradeHostState s) {
  return nameIn(kUpgradeHostStates, s, "pending");
}
std::optional<UpgradeHostState> parseUpgradeHostState(const std::string& s) {
  return parseIn(kUpgradeHostStates, s);
}

}  // namespace allot::model
