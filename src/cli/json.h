#pragma once
// The JSON type of the CLI: ordered, so `-o json` prints an object's fields in the order the API
// sent them.

#include <nlohmann/json.hpp>

namespace allot::cli {

using json = nlohmann::ordered_json;

}  // namespace allot::cli
