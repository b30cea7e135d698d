#pragma once
// allotd.toml's [limits] and [idle] webhook_allow: what one user or team may hold, the floor a
// job asking nothing is counted at, each job's stored log, the disk reserve, the connections
// allotd holds, and where webhooks may point (docs/access.md "Limits", deploy/allotd.example.toml).

#include <toml++/toml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api/connection_limit.h"
#include "common/status.h"
#include "control/cluster.h"
#include "control/log_store.h"

namespace allot {

// Keys absent keep the defaults already in `jobs`, `logs`, `connections` and
// `writeReserveBytes` (api::ServerConfig's). An error names the key.
Status readLimitsConfig(const toml::table& tbl, control::JobLimits& jobs,
                        control::LogStoreOptions& logs, std::vector<std::string>& webhookAllow,
                        api::ConnectionLimits& connections, int64_t& writeReserveBytes);

// One webhook_allow entry: an http:// URL prefix whose host is followed by '/' (so that
// "http://hooks.example.com/" cannot be stretched to "http://hooks.example.com.evil.net/").
Status checkWebhookPrefix(const std::string& prefix);

}  // namespace allot
