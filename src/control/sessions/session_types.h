#pragma once
// What `allot session create` asks for and where an open session is reached. docs/sessions.md.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace allot::control {

// What `allot session create` asks for; unset fields come from the profile's defaults.
struct SessionRequest {
  std::string profile;  // empty: "jupyter"
  std::string name;     // empty: the profile's name, numbered when the owner has one already
  std::string team;     // empty: the caller's team
  std::string project;
  std::optional<int> gpus;
  std::optional<int> gpuMilli;  // a share of one GPU (gpus must then be 1)
  std::optional<int> cpuMillis;
  std::optional<int64_t> memoryMib;
  std::string storage;  // empty: the profile's first storage type
};

struct SessionEndpoint {
  std::string host;
  std::string app;
  std::string token;  // Jupyter's; empty for a "command" session
};

}  // namespace allot::control
