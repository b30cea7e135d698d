#pragma once
// Looking into what a change writes, for tests of the Cluster and of the services alone.

#include <variant>

#include "control/change.h"

namespace allot::control {

// The first write of kind Op in a change's batch, or nullptr.
template <typename Op, typename T>
const Op* findOp(const Change<T>& c) {
  for (const auto& op : c.batch.ops) {
    if (auto* o = std::get_if<Op>(&op)) return o;
  }
  return nullptr;
}

}  // namespace allot::control
