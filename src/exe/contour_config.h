#pragma once
// allotd.toml's [contours] section: the contours, the default one, and the least role that may
// submit into each (control::ContourOptions; docs/contours.md, deploy/allotd.example.toml).

#include <toml++/toml.h>

#include "common/status.h"
#include "control/contours.h"

namespace allot {

// Reads [contours] into `out` (absent: out keeps its defaults, dev/test/prod) and validates the
// result. An error names the key: "contours.submit_role.prod: ...".
Status readContourConfig(const toml::table& tbl, control::ContourOptions& out);

}  // namespace allot
