#pragma once
// Asks a session's Jupyter how it is used, for idle culling (docs/sessions.md, "Idle culling"):
// GET api/status (open kernel connections, last activity) and api/kernels (which are busy) over
// its Unix socket, with its token. Blocking, with a short timeout: the agent runs it off its loop.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"

namespace allot::agent {

struct JupyterActivity {
  int connections = 0;      // open kernel WebSockets
  int busyKernels = 0;      // kernels whose execution_state is busy
  TimeMs lastActivity = 0;  // Jupyter's last_activity (requests, kernel messages); 0 = unknown
  bool known = true;        // false: the last look got no answer (the values are older)
};

// nullopt when Jupyter does not answer sensibly within `timeoutMs` per request.
std::optional<JupyterActivity> probeJupyter(const std::string& socketPath, int64_t sessionId,
                                            const std::string& token, int timeoutMs = 3000);

// The activity in the bodies of api/status and api/kernels; nullopt when they are not the JSON
// Jupyter writes. The session's owner runs that server, so whatever they hold must neither throw
// nor be cast out of range: a field of the wrong type or size reads as absent.
std::optional<JupyterActivity> jupyterActivityOf(std::string_view status, std::string_view kernels);

}  // namespace allot::agent
