#pragma once
// Finding a session by what people type: its id, or the name of one of their live sessions.

#include <cstdint>
#include <string>

#include "cli/api_client.h"
#include "cli/context.h"
#include "common/status.h"

namespace allot::cli {

Result<int64_t> findSession(ApiClient& api, const std::string& idOrName);
// The same through the Context's client; settings that make no client fail it.
Result<int64_t> findSession(Context& ctx, const std::string& idOrName);

}  // namespace allot::cli
