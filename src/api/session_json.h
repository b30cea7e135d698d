#pragma once
// A session as the API shows it (docs/api.md, "Sessions"): the job it is, in session words, with
// what its agent last said about it. Never Jupyter's token.

#include <nlohmann/json.hpp>

#include "model/model.h"

namespace allot::api {

class Server;

// queued, starting, running, stopping, stopped, failed or lost.
const char* sessionState(const model::Job& j, bool ready);
nlohmann::json sessionJson(Server& s, const model::Job& j);

}  // namespace allot::api
