#pragma once
// Runs a reprovisioning hook on this host: an ansible playbook against localhost (connection
// local) with an inventory and extra vars generated here, or a plain script given the same vars in
// its environment. Each run gets its own process group, killed whole at the timeout; stdout and
// stderr are captured together, the last kMaxHookOutput bytes kept. See deploy/ansible/README.md.
//
// Threading: runHook blocks until the hook ends; the agent calls it off its I/O thread. It forks,
// so everything the child needs is prepared before the fork.

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "model/agent_protocol.h"

namespace allot::agent {

inline constexpr size_t kMaxHookOutput = 256 * 1024;

struct HookRun {
  model::HookSpec spec;
  // Extra vars (allot_host, allot_team, allot_profile, allot_driver_version, allot_state_dir):
  // ansible's -e @vars.json, and ALLOT_HOST, ALLOT_TEAM, ... for a script.
  nlohmann::json vars = nlohmann::json::object();
  // Where the generated inventory and vars file go; created if missing.
  std::string runDir;
  // Called, on runHook's thread, with each piece of output as it comes (all of it, before the
  // tail is cut), so that a caller can show the run live; and with the note of a timeout kill.
  std::function<void(std::string_view)> onOutput;
};

// The result of the run; never throws. A hook that cannot start (no ansible-playbook, no such
// script) fails with the reason as its output.
model::HookResult runHook(const HookRun& run);

}  // namespace allot::agent
