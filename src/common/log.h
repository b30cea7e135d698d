#pragma once
// Logging: spdlog with one default logger per process. Structured fields go in as key=value
// pairs in the message so that logs stay greppable. Never log a token or password.

#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace allot {

// The records' layout: "<time> <level> <process>: <message>", or with json one object per line.
// Either way the message is escaped so that a record is one line (and valid JSON): control
// characters, and in JSON quotes and backslashes, never reach the log as they are.
std::unique_ptr<spdlog::formatter> logFormatter(bool json);

// level: trace|debug|info|warn|error; json=true writes one JSON object per line.
void setupLogging(const std::string& processName, const std::string& level, bool json = false);

}  // namespace allot
