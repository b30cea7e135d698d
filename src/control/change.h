#pragma once
// Change: what a service's operation hands its caller. The operation has already changed memory;
// the change carries the value to show, the WriteBatch that makes it durable and the hosts whose
// agents must hear about it. The caller commits the batch (with the request's audit entry, in one
// commit), waits until it is durable, then replies and pushes: nothing leaves allotd before the
// write that records it is on disk (docs/architecture.md).

#include <set>
#include <string>
#include <utility>

#include "store/store.h"

namespace allot::control {

template <typename T>
struct Change {
  T value;
  store::WriteBatch batch;
  std::set<std::string> pushHosts;  // agents to send their desired state once durable

  // Takes in another change's writes and pushes, after this one's.
  template <typename U>
  void absorb(Change<U>&& other) {
    for (auto& op : other.batch.ops) batch.ops.push_back(std::move(op));
    pushHosts.insert(other.pushHosts.begin(), other.pushHosts.end());
  }
};

}  // namespace allot::control
