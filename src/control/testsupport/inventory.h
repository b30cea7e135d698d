#pragma once
// What a simulated agent reports of its host, for tests that join hosts.

#include <string>

#include "model/agent_protocol.h"

namespace allot::control {

// 16 CPUs, 64 GiB and `gpus` A100s (80 GiB each), numbered from 0.
inline model::Inventory inventory(int gpus) {
  model::Inventory inv;
  inv.hostname = "h";
  inv.cpus = 16;
  inv.memoryMib = 65536;
  inv.gpuProvider = "simulated";
  inv.simulated = true;
  for (int i = 0; i < gpus; ++i)
    inv.gpus.push_back({i, "GPU-" + std::to_string(i), i, "A100", 81920, 0, "", "", "", false});
  return inv;
}

}  // namespace allot::control
