#pragma once
// allotd.toml's [health] and [handover] sections: how hosts are checked and handed over
// (control::HostLifecycleOptions; docs/hosts.md, deploy/allotd.example.toml).

#include <toml++/toml.h>

#include <map>
#include <string>

#include "common/status.h"
#include "control/cluster.h"

namespace allot {

// Reads the sections into `out` (keys absent keep its defaults). Profiles named must exist in
// `profiles`. An error names the key: "health.interval: ...".
Status readLifecycleConfig(const toml::table& tbl,
                           const std::map<std::string, control::HookProfile>& profiles,
                           control::HostLifecycleOptions& out);

}  // namespace allot
