#pragma once
// Which images a team's jobs may run in (docs/environments.md, "Allow-list"): platform admins
// list prefixes of image references per team (Team::imageAllow); a job, a profile or a team's
// default image outside them is refused at submission, before any host fetches anything.
//
// A prefix matches at a boundary of the reference: "registry:5000/ml" allows
// "registry:5000/ml:1", "registry:5000/ml/pytorch:2.3" and "registry:5000/ml@sha256:...", never
// "registry:5000/mlevil/x". A prefix that ends in "/" allows what lies under it.

#include <string>
#include <vector>

#include "common/status.h"
#include "model/image_ref.h"

namespace allot::control {

inline constexpr size_t kMaxImageAllowPrefixes = 64;

// Whether `ref` (ImageRef::str()) lies under one of `allow`.
bool imageAllowed(const std::vector<std::string>& allow, const std::string& ref);

// OK when `team`'s allow-list takes `ref`; otherwise InvalidArgument naming `field` ("image"),
// the reference and the rule it broke.
Status checkImageAllowed(const std::string& team, const std::vector<std::string>& allow,
                         const model::ImageRef& ref, const char* field = "image");

// Each prefix starts with a registry (host[:port]) and holds only what references hold; at most
// kMaxImageAllowPrefixes, no duplicates. The error names "allow".
Status validateImageAllow(const std::vector<std::string>& allow);

}  // namespace allot::control
