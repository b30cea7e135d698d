#include "model/model.h"

namespace allot::model {

const char* roleName(Role r) {
  switch (r) {
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
  for (auto r : {Role::kMember, Role::kPlatformAdmin, Role::kTeamAdmin}) {
    if (s == roleName(r)) return r;
  }
  return std::nullopt;
}

const char* hostStateName(HostState s) {
  return s == HostState::kOnline ? "online" : "unreachable";
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

}  // namespace allot::model
