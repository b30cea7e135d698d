#pragma once
// Logging: spdlog with one default logger per process. Structured fields go in as key=value
// pairs in the message so that logs stay greppable. Never log a token or password.

#include <spdlog/spdlog.h>

#include <string>

namespace allot {

// level: trace|debug|info|warn|error; json=true writes one JSON object per line.
void setupLogging(const std::string& processName, const std::string& level, bool json = false);

}  // namespace allot
