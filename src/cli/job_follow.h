#pragma once
// Following a job: streaming its output through the long-poll logs endpoint, and what a finished
// job means as an exit status for `allot run --wait`. Called from the CLI's one thread.

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include "cli/api_client.h"
#include "cli/json.h"
#include "common/status.h"

namespace allot::cli {

bool isTerminalState(std::string_view state);

// The exit status `allot run --wait` ends with: 0 for succeeded; the job's exit code when it has a
// non-zero one; 128+signal when a signal killed it; 1 otherwise (lost, failed to start, cancelled
// before it ran, or a failure with no code).
int exitCodeForJob(const json& job);

// One line on how a job ended, for stderr: "job j-42 failed: exit code 3".
std::string endingSummary(const json& job);

// Writes the job's output to `out`, flushing as it arrives. Without `follow`, stops once the bytes
// that exist now are written; with it, long-polls (GET .../logs?offset=N&wait=waitSeconds) until
// the job is terminal and every byte is read. Returns the last job state the server reported.
// `rank` picks the process of a multi-host job.
// `fromOffset`: where to start (tailStart's answer, for --tail). `onQuiet`, when set, is called
// with the job's state after each poll that brought no output (run --wait says why it waits).
Result<std::string> streamLogs(ApiClient& api, int64_t jobId, std::ostream& out, bool follow,
                               int waitSeconds = 10, int rank = 0, int64_t fromOffset = 0,
                               const std::function<void(const std::string&)>& onQuiet = {});

// Where the last `lines` lines of the job's output begin, as `tail -n` counts them (a last line
// without a newline counts): reads back from the end in growing windows, so a long log costs
// only its tail.
Result<int64_t> tailStart(ApiClient& api, int64_t jobId, int rank, int lines);
// Where output received at or after `isoTime` begins (allotd indexes logs by the second), for
// logs --since.
Result<int64_t> sinceStart(ApiClient& api, int64_t jobId, int rank, const std::string& isoTime);

}  // namespace allot::cli
