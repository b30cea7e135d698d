#include "cli/api_client.h"

#include <cctype>
#include <charconv>

#include "common/bounded_json.h"

namespace allot::cli {
namespace {

constexpr const char* kApiBase = "/api/v1";

Status statusOfCode(std::string_view code, std::string msg) {
  if (code == "invalid_argument") return Status::InvalidArgument(std::move(msg));
  if (code == "not_found") return Status::NotFound(std::move(msg));
  if (code == "already_exists") return Status::AlreadyExists(std::move(msg));
  if (code == "failed_precondition") return Status::FailedPrecondition(std::move(msg));
  if (code == "unauthenticated") return Status::Unauthenticated(std::move(msg));
  if (code == "permission_denied") return Status::PermissionDenied(std::move(msg));
  if (code == "too_large") return Status::TooLarge(std::move(msg));
  if (code == "unavailable") return Status::Unavailable(std::move(msg));
  return Status::Internal(std::move(msg));
}

std::string codeOfHttpStatus(int httpStatus) {
  switch (httpStatus) {
    case 400:
      return "invalid_argument";
    case 401:
      return "unauthenticated";
    case 403:
      return "permission_denied";
    case 404:
      return "not_found";
    case 409:
      return "failed_precondition";
    case 413:
      return "too_large";
    case 502:
    case 503:
    case 504:
      return "unavailable";
    default:
      return "internal";
  }
}

// The body for a message: one line, at most ~200 characters.
std::string snippet(std::string_view body) {
  std::string out;
  for (char c : body.substr(0, 200)) out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (body.size() > 200) out += "...";
  return out;
}

}  // namespace

Status statusFromErrorReply(int httpStatus, std::string_view body) {
  json doc = parseBoundedJson<json>(body);
  if (doc.is_object()) {
    auto err = doc.find("error");
    if (err != doc.end() && err->is_object()) {
      std::string code = err->value("code", codeOfHttpStatus(httpStatus));
      auto msg = err->find("message");
      if (msg != err->end() && msg->is_string() && !msg->get<std::string>().empty()) {
        Status s = statusOfCode(code, msg->get<std::string>());
        std::string field = err->value("field", "");
        if (s.code() == Code::kInvalidArgument && !field.empty()) {
          return Status::InvalidArgument(s.message(), field);
        }
        return s;
      }
    }
  }
  std::string msg = "server replied with HTTP " + std::to_string(httpStatus);
  if (std::string text = snippet(body); !text.empty()) msg += ": " + text;
  return statusOfCode(codeOfHttpStatus(httpStatus), msg);
}

std::string urlEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Status ApiClient::failure(int httpStatus, std::string_view body) const {
  Status s = statusFromErrorReply(httpStatus, body);
  if (s.code() == Code::kUnauthenticated && !http_->hasToken()) {
    return Status::Unauthenticated(
        s.message() +
        " (no token configured: run `allot login --server URL --token TOKEN` or set ALLOT_TOKEN)");
  }
  return s;
}

Result<json> ApiClient::call(std::string_view method, const std::string& path,
                             const std::string& body) {
  auto res = http_->request(method, kApiBase + path, body);
  if (!res.ok()) return res.status();
  if (res->status < 200 || res->status >= 300) return failure(res->status, res->body);
  if (res->body.empty()) return json::object();
  json doc = parseBoundedJson<json>(res->body);
  if (doc.is_discarded()) {
    return Status::Internal("server at " + serverUrl() +
                            " sent a reply that is not JSON: " + snippet(res->body));
  }
  return doc;
}

Result<json> ApiClient::get(const std::string& path) { return call("GET", path, ""); }

Result<json> ApiClient::post(const std::string& path, const json& body) {
  return call("POST", path, body.dump());
}

Result<json> ApiClient::put(const std::string& path, const json& body) {
  return call("PUT", path, body.dump());
}

Result<json> ApiClient::patch(const std::string& path, const json& body) {
  return call("PATCH", path, body.dump());
}

Result<json> ApiClient::del(const std::string& path) { return call("DELETE", path, ""); }

Result<HttpResponse> ApiClient::getRaw(const std::string& path) {
  auto res = http_->request("GET", kApiBase + path, "");
  if (!res.ok()) return res.status();
  if (res->status < 200 || res->status >= 300) return failure(res->status, res->body);
  return res;
}

Status ApiClient::relayUpgraded(const std::string& path, int inFd, int outFd) {
  auto res = http_->relayUpgraded(kApiBase + path, "tcp", inFd, outFd);
  if (!res.ok()) return res.status();
  if (res->status != 101) return failure(res->status, res->body);
  return Status::Ok();
}

Result<LogChunk> ApiClient::jobLogs(int64_t jobId, int64_t offset, int waitSeconds, int rank) {
  std::string target = std::string(kApiBase) + "/jobs/" + std::to_string(jobId) +
                       "/logs?offset=" + std::to_string(offset);
  if (waitSeconds > 0) target += "&wait=" + std::to_string(waitSeconds);
  if (rank > 0) target += "&rank=" + std::to_string(rank);
  // The server may hold the request for waitSeconds; allow for that on top of the usual timeout.
  auto res = http_->request("GET", target, {}, std::chrono::seconds(waitSeconds + 30));
  if (!res.ok()) return res.status();
  if (res->status < 200 || res->status >= 300) return failure(res->status, res->body);
  LogChunk chunk;
  chunk.bytes = std::move(res->body);
  std::string size = res->header("X-Allot-Log-Size");
  int64_t n = 0;
  auto [p, ec] = std::from_chars(size.data(), size.data() + size.size(), n);
  if (!size.empty() && ec == std::errc() && p == size.data() + size.size()) chunk.totalSize = n;
  chunk.jobState = res->header("X-Allot-Job-State");
  return chunk;
}

}  // namespace allot::cli
