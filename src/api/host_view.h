#pragma once
// A host as one caller may see it. While a lease or a handover moves a host between teams, the
// host's JSON and its history name the team it goes to ("handover to team vision"); a caller
// who cannot see that team reads "another team" instead, as leases already hide their holders.

#include <nlohmann/json.hpp>
#include <string>

#include "control/principal.h"
#include "model/model.h"

namespace allot::api {

// model::toJson(h) with the teams `p` may not see hidden.
nlohmann::json hostJsonFor(const control::Principal& p, const model::Host& h);
// `text` with each "team NAME" whose team `p` may not see written as "another team".
std::string hideOtherTeams(const control::Principal& p, const std::string& text);

}  // namespace allot::api
