#pragma once
// ApiClient: the Allot REST API (docs/api.md) as the CLI uses it. Sends JSON to /api/v1 over an
// HttpClient and turns an API error body into a Status carrying the server's message. Owns its
// HttpClient; one thread calls it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/http_client.h"
#include "cli/json.h"
#include "common/status.h"

namespace allot::cli {

// The Status an error reply stands for: the code and message from
// {"error":{"code","message","field"}}, or, for a body that is not one, a message naming the HTTP
// status and the start of the body.
Status statusFromErrorReply(int httpStatus, std::string_view body);

// Percent-encodes one path segment or query value.
std::string urlEncode(std::string_view s);

// One chunk of a job's output, from GET /jobs/{id}/logs.
struct LogChunk {
  std::string bytes;
  int64_t totalSize = -1;  // X-Allot-Log-Size; -1 when the server did not say
  std::string jobState;    // X-Allot-Job-State; empty when the server did not say
};

class ApiClient {
 public:
  explicit ApiClient(std::unique_ptr<HttpClient> http) : http_(std::move(http)) {}

  // `path` is under /api/v1 ("/jobs?state=queued").
  Result<json> get(const std::string& path);
  Result<json> post(const std::string& path, const json& body);
  Result<json> put(const std::string& path, const json& body);
  Result<json> patch(const std::string& path, const json& body);
  Result<json> del(const std::string& path);
  // Long-polls for output past `offset`; the server waits up to `waitSeconds` for new bytes.
  // `rank`: which process of a multi-host job (0 for a single-host job).
  Result<LogChunk> jobLogs(int64_t jobId, int64_t offset, int waitSeconds, int rank = 0);

  // A GET whose reply is not one JSON document (JSON lines): the reply as sent, headers included;
  // an error reply is a Status like everywhere else.
  Result<HttpResponse> getRaw(const std::string& path);

  // A byte stream through allotd (GET `path` upgraded to "tcp"; the session SSH relay): copies
  // `inFd` to it and it to `outFd` until either ends. An error reply is a Status.
  Status relayUpgraded(const std::string& path, int inFd, int outFd);

  const std::string& serverUrl() const { return http_->url().text; }

 private:
  Result<json> call(std::string_view method, const std::string& path, const std::string& body);
  Status failure(int httpStatus, std::string_view body) const;

  std::unique_ptr<HttpClient> http_;
};

}  // namespace allot::cli
