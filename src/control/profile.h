#pragma once
// Session profiles (docs/sessions.md): the rules a profile must keep, apart from who may change
// it (control/authz.h). Pure: the profile and the teams that exist in, a verdict out.

#include <map>
#include <string>

#include "common/status.h"
#include "model/model.h"

namespace allot::control {

// The storage types a session may ask for (docs/sessions.md, "Storage").
bool isStorageType(const std::string& s);

// Checks every field of `p` (its name, command, environment, resources, storage, idle policy,
// lifetime, visibility) against the teams that exist; the first fault is an InvalidArgument
// naming the field as the API spells it ("defaults.gpus", "visible_to"). Does not check who may
// make it, nor that its team exists (the caller does: another team is NotFound, not 400).
Status validateProfile(const model::Profile& p, const std::map<std::string, model::Team>& teams);

}  // namespace allot::control
