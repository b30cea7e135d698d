#pragma once
// The names people type and the GPU model names agents report: the rules every service checks
// them by, and the message for a request that needs a team and names none.

#include <string>

#include "common/status.h"
#include "control/principal.h"

namespace allot::control {

// Who made a change allotd made by itself (a drain finishing, a task's result, a lease starting),
// in transition records and lease decisions.
inline constexpr const char* kSystemActor = "allotd";

// Names people type: 1-63 characters of [a-z0-9._-], starting with a letter or digit.
Status validateName(const std::string& value, const char* field);
// GPU model names as NVML reports them ("A100", "NVIDIA H100 80GB HBM3"): 1-128 printable ASCII
// characters without ',' or '=' (the CLI's list separators), no space at either end, and not
// "any", which stands for every model.
Status validateGpuModel(const std::string& value, const std::string& field);

// The message for a request that names no team when the caller's team is not implied: they have
// none, or several.
std::string teamRequired(const Principal& p);

}  // namespace allot::control
