#pragma once
// What a disruptive action would stop, said before it is done: approving a lease (its start
// preempts the work on its hosts) and draining a host with a deadline (work still there then is
// stopped). The CLI asks, or needs --force; the console shows the list in its confirmation
// (docs/hosts.md, "Actions that stop work").

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "control/world.h"
#include "nlohmann/json.hpp"

namespace allot::control {

struct StoppedJob {
  int64_t id = 0;
  std::string team;
  std::string user;
  std::string name;
  std::string host;
  int gpus = 0;
};

// The jobs on `hosts` that would still run at `stopAt`: all placed there but those whose declared
// maximum runtime ends, with `graceMs` to stop, by then. Sessions count: they stop too. In id
// order, each once (a gang's ranks on several of the hosts).
std::vector<StoppedJob> workStoppedOn(const World& world, const std::vector<std::string>& hosts,
                                      TimeMs stopAt, int64_t graceMs);

// {"would_stop": [{"job","team","user","name","host","gpus"}], "stops_at": ISO 8601}.
nlohmann::json impactJson(const std::vector<StoppedJob>& stopped, TimeMs stopAt);

}  // namespace allot::control
