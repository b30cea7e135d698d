#include "cli/job_follow.h"

#include <algorithm>
#include <charconv>

#include "cli/format.h"

namespace allot::cli {

bool isTerminalState(std::string_view state) {
  return state == "succeeded" || state == "failed" || state == "cancelled" || state == "lost" ||
         state == "preempted";
}

int exitCodeForJob(const json& job) {
  std::string state = text(job, "state", "");
  if (state == "succeeded") return 0;
  auto code = job.find("exit_code");
  if (code != job.end() && code->is_number_integer() && code->get<int>() != 0) {
    return code->get<int>() & 0xFF;
  }
  auto sig = job.find("signal");
  if (sig != job.end() && sig->is_number_integer() && sig->get<int>() > 0) {
    return (128 + sig->get<int>()) & 0xFF;
  }
  return 1;
}

std::string endingSummary(const json& job) {
  std::string out = "job " + jobIdText(job) + " " + text(job, "state", "ended");
  std::vector<std::string> parts;
  auto code = job.find("exit_code");
  if (code != job.end() && code->is_number_integer()) {
    parts.push_back("exit code " + std::to_string(code->get<int>()));
  }
  auto sig = job.find("signal");
  if (sig != job.end() && sig->is_number_integer()) {
    parts.push_back("signal " + std::to_string(sig->get<int>()));
  }
  if (std::string reason = text(job, "reason", ""); !reason.empty()) parts.push_back(reason);
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? ": " : "; ") + parts[i];
  return out;
}

Result<int64_t> tailStart(ApiClient& api, int64_t jobId, int rank, int lines) {
  // An offset past the end reads nothing but says how long the log is.
  auto end = api.jobLogs(jobId, INT64_MAX / 2, 0, rank);
  if (!end.ok()) return end.status();
  const int64_t size = std::max<int64_t>(0, end->totalSize);
  if (lines <= 0) return size;
  for (int64_t window = 16 << 10;; window *= 4) {
    const int64_t from = std::max<int64_t>(0, size - window);
    std::string tail;
    for (int64_t at = from; at < size;) {
      auto chunk = api.jobLogs(jobId, at, 0, rank);
      if (!chunk.ok()) return chunk.status();
      if (chunk->bytes.empty()) break;
      at += static_cast<int64_t>(chunk->bytes.size());
      tail += chunk->bytes;
    }
    // Newlines from the end: the lines-th one before a trailing partial line marks the start.
    int64_t pos = static_cast<int64_t>(tail.size());
    if (pos > 0 && tail.back() == '\n') --pos;
    int found = 0;
    while (pos > 0) {
      if (tail[static_cast<size_t>(pos - 1)] == '\n' && ++found == lines) return from + pos;
      --pos;
    }
    if (from == 0) return 0;  // fewer lines than asked: all of it
  }
}

Result<int64_t> sinceStart(ApiClient& api, int64_t jobId, int rank, const std::string& isoTime) {
  std::string path = "/jobs/" + std::to_string(jobId) + "/logs?since=" + urlEncode(isoTime);
  if (rank > 0) path += "&rank=" + std::to_string(rank);
  auto res = api.getRaw(path);
  if (!res.ok()) return res.status();
  const std::string at = res->header("X-Allot-Log-Offset");
  int64_t n = 0;
  auto [p, ec] = std::from_chars(at.data(), at.data() + at.size(), n);
  if (at.empty() || ec != std::errc() || p != at.data() + at.size())
    return Status::FailedPrecondition(
        "this allotd does not index logs by time (--since); "
        "upgrade it, or use --tail");
  return n;
}

Result<std::string> streamLogs(ApiClient& api, int64_t jobId, std::ostream& out, bool follow,
                               int waitSeconds, int rank, int64_t fromOffset,
                               const std::function<void(const std::string&)>& onQuiet) {
  int64_t offset = fromOffset;
  std::string state;
  while (true) {
    auto chunk = api.jobLogs(jobId, offset, follow ? waitSeconds : 0, rank);
    if (!chunk.ok()) return chunk.status();
    out.write(chunk->bytes.data(), static_cast<std::streamsize>(chunk->bytes.size()));
    out.flush();
    offset += static_cast<int64_t>(chunk->bytes.size());
    if (!chunk->jobState.empty()) state = chunk->jobState;
    bool allRead = chunk->totalSize < 0 || offset >= chunk->totalSize;
    // An empty chunk while the server claims more bytes would loop forever; take it as the end.
    bool noProgress = chunk->bytes.empty();
    if (noProgress && follow && onQuiet && !isTerminalState(state)) onQuiet(state);
    if (!follow && (allRead || noProgress)) break;
    if (follow && isTerminalState(state) && (allRead || noProgress)) break;
    if (follow && state.empty() && noProgress) {
      // A server that does not send X-Allot-Job-State: ask for the job itself.
      auto job = api.get("/jobs/" + std::to_string(jobId));
      if (!job.ok()) return job.status();
      state = text(*job, "state", "");
      if (isTerminalState(state)) {
        continue;  // one more read picks up bytes written after the last chunk
      }
    }
  }
  return state;
}

}  // namespace allot::cli
