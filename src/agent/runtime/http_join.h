#pragma once
// The agent's one HTTP call: joining with a join token (POST /api/v1/hosts/join), over plain
// HTTP or HTTPS as the server URL says.

#include <string>

#include "common/status.h"
#include "model/agent_protocol.h"

namespace allot::agent {

struct ServerAddress {
  std::string host;
  std::string port;
  bool tls = false;  // https://: the certificate is verified (CA and host name)
};

// Parses "http://host:port" or "https://host:port" (default ports 80 and 443).
Result<ServerAddress> parseServerUrl(const std::string& url);

struct JoinResult {
  std::string host;
  std::string credential;
};
// `caFile`: the CA that signed allotd's certificate, for https ("" = the system's CAs).
Result<JoinResult> joinCluster(const ServerAddress& server, const std::string& caFile,
                               const std::string& joinToken, const std::string& name,
                               const model::Inventory& inventory);

}  // namespace allot::agent
