#pragma once
// Stand-ins for what one service asks of another, for the services' unit tests: each records
// what it was asked and does nothing else.

#include <string>
#include <vector>

#include "control/access/access_service.h"
#include "control/hosts/host_service.h"

namespace allot::control::testsupport {

// The sessions side as the access service tells it of users who left teams.
class RecordingMembership : public MembershipObserver {
 public:
  void leftTeams(const model::User& u, store::WriteBatch&) override { left.push_back(u.name); }
  std::vector<std::string> left;
};

// The jobs side as the hosts and idle services preempt through it.
class RecordingPreemption : public JobPreemption {
 public:
  void evict(const sched::Eviction& e, Change<std::vector<int64_t>>&) override {
    evicted.push_back(e.jobId);
  }
  std::vector<int64_t> evicted;
};

}  // namespace allot::control::testsupport
