#pragma once
// Before an action that stops running work (approving a lease, draining with a deadline): ask
// allotd what it would stop, list it, and go on only when told to. On a terminal the user is
// asked; elsewhere (a script) the command refuses unless --force, so nothing is preempted by a
// command that did not say it meant to.

#include <optional>
#include <string>

#include "cli/context.h"

namespace allot::cli {

// `impactPath`: the GET that says what would stop; `action`: "approving lease 3". nullopt: go
// on (nothing stops, --force, or the user said yes); otherwise the exit code. A server without
// the impact route (an older allotd) is not asked: the action goes on as it did.
std::optional<int> confirmDisruption(Context& ctx, const std::string& impactPath,
                                     const std::string& action, bool force);

}  // namespace allot::cli
