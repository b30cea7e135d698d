#pragma once
// The agent's one plain HTTP call: joining with a join token (POST /api/v1/hosts/join).

#include <string>

#include "common/status.h"
#include "model/agent_protocol.h"

namespace allot::agent {

struct ServerAddress {
  std::string host;
  std::string port;
};

// Parses "http://host:port"; https is refused with a clear message.
Result<ServerAddress> parseServerUrl(const std::string& url);

struct JoinResult {
  std::string host;
  std::string credential;
};
Result<JoinResult> joinCluster(const ServerAddress& server, const std::string& joinToken,
                               const std::string& name, const model::Inventory& inventory);

}  // namespace allot::agent
