#pragma once
// Idle-allocation policy: which policy applies to a job (project over team over platform), what
// a valid policy is, and the detector's decision for one job at one moment. Pure: inputs in,
// decisions out; IdleService (idle/idle_service.h) owns the state and acts on the decisions.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/model.h"

namespace allot::control {

enum class PolicySource { kPlatform, kTeam, kProject };
const char* policySourceName(PolicySource s);

struct EffectiveIdlePolicy {
  model::IdlePolicy policy;
  PolicySource source = PolicySource::kPlatform;
};

// The project's policy if it has one, else its team's, else the platform's. Either pointer may be
// null (a job with no project, a team that no longer exists).
EffectiveIdlePolicy effectiveIdlePolicy(const model::IdlePolicy& platform, const model::Team* team,
                                        const model::Project* project);

// A change to a policy; a field left empty keeps the value the owner sees now (the effective
// one). `webhook` "" clears it.
struct IdlePolicyUpdate {
  std::optional<double> thresholdPct;
  std::optional<int64_t> afterMs;
  std::optional<model::IdleAction> action;
  std::optional<int64_t> graceMs;
  std::optional<std::string> webhook;
};

// Checks every field; the error names the first bad one (threshold_percent, after, grace, webhook).
Status validateIdlePolicy(const model::IdlePolicy& p);

// Where a webhook goes. Only plain http:// (allotd has no TLS client); no user:password@.
struct WebhookTarget {
  std::string host;
  uint16_t port = 80;
  std::string target = "/";  // path and query, as sent in the request line
};
Result<WebhookTarget> parseWebhookUrl(const std::string& url);

// The detector's memory of one running job, in allotd's memory only: a restart starts every job
// busy again, which only delays detection by up to the policy's idle duration.
struct IdleTrack {
  TimeMs startedAt = 0;   // the job's startedAt when tracking began; another start resets it
  TimeMs lastBusyAt = 0;  // the last moment a GPU of it was at or above the threshold, or unknown
  TimeMs idleSince = 0;   // while flagged: lastBusyAt when it was flagged
  TimeMs notifiedAt = 0;  // while flagged: when allocation_idle was emitted; 0 = not flagged
  TimeMs reclaimAt = 0;   // while flagged under a reclaim policy: when to take the GPUs; 0 = never
  bool reclaimed = false;
  bool flagged() const { return notifiedAt != 0; }
};

enum class IdleStep { kNone, kFlag, kBusyAgain, kReclaim };

// One look at a job at `now`, after lastBusyAt was brought up to date. Updates the track and says
// what to announce or do: flag it once per idle episode (idle for afterMs), clear it if it was busy
// after being flagged, reclaim it once its grace has passed while still idle.
IdleStep stepIdle(IdleTrack& t, const model::IdlePolicy& p, TimeMs now);

// "GPUs under 10% for 30m", for messages and the reclaim reason.
std::string describeIdle(const model::IdlePolicy& p);

// A job flagged idle, as its owners and the usage report see it.
struct IdleAllocation {
  int64_t jobId = 0;
  std::string team;
  std::string project;
  std::string user;
  std::vector<std::string> hosts;  // rank order
  int gpus = 0;                    // on all hosts together
  TimeMs idleSince = 0;
  TimeMs notifiedAt = 0;
  TimeMs reclaimAt = 0;  // 0 = not to be reclaimed
  double thresholdPct = 0;
};

// What one idle check did: the events to announce (and send to webhooks once durable), and the
// jobs it evicted, whose eviction the caller confirms with evictionsDurable after the commit.
struct IdleCheck {
  std::vector<model::Event> events;
  std::vector<int64_t> reclaimed;
};

// Whether `url` starts with one of the allowed prefixes.
bool webhookAllowed(const std::vector<std::string>& allow, const std::string& url);

}  // namespace allot::control
