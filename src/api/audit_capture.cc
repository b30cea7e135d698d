#include "api/audit_capture.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "api/redact.h"
#include "common/bounded_json.h"
#include "control/authz.h"

namespace allot::api {
namespace {

using nlohmann::json;

bool isParam(std::string_view seg) {
  return seg.size() > 2 && seg.front() == '{' && seg.back() == '}';
}

// "hosts" -> "host", "policies" -> "policy", "join-tokens" -> "join-token".
std::string singular(std::string_view plural) {
  std::string s(plural);
  if (s.size() > 3 && s.ends_with("ies")) return s.substr(0, s.size() - 3) + "y";
  if (s.size() > 1 && s.back() == 's') s.pop_back();
  return s;
}

std::string idText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return "";
}

json parseOrNull(std::string_view text) {
  if (text.empty()) return nullptr;
  json j = parseBoundedJson(text);
  return j.is_discarded() ? json(nullptr) : j;
}

std::string dumpRedacted(json j) { return ApiResponse::dumpBody(redactSecrets(std::move(j))); }

// `j` as kept in an entry: its text when nothing in it is secret (`dumped`, when the reply's
// body already is that text), else a redacted copy's. Text that spells no secret word names no
// secret field, and one scan of it is cheaper than walking the document's keys.
std::string keptText(const json& j, const std::string* dumped) {
  if (dumped && !textMayNameSecrets(*dumped)) return *dumped;
  if (holdsSecrets(j)) return dumpRedacted(j);
  return dumped ? *dumped : ApiResponse::dumpBody(j);
}

// A reply as JSON: its value when the handler built it from a temporary, else its body parsed.
std::shared_ptr<const json> replyJson(const ApiResponse& res) {
  if (res.value) return res.value;
  return std::make_shared<const json>(parseOrNull(res.body));
}

bool isSuccess(http::status s) {
  const int code = static_cast<int>(s);
  return code >= 200 && code < 300;
}

// The resource at `path` as a platform admin sees it through the API; null when no GET serves
// it or it does not exist (any reply but 2xx).
boost::asio::awaitable<json> readResource(const Router& router, const std::string& path) {
  auto match = router.match(http::verb::get, path);
  json out = nullptr;
  if (!match.route) co_return out;
  HttpRequest get{http::verb::get, path, 11};
  ApiRequest req{get, std::move(match.params), {}, control::authz::auditReader()};
  ApiResponse res = co_await match.route->handler(req);
  if (isSuccess(res.status)) out = *replyJson(res);
  co_return out;
}

}  // namespace

std::string auditObjectOf(const std::string& pattern,
                          const std::map<std::string, std::string>& params, const json& reply) {
  const auto segs = splitPath(pattern);
  std::string object;
  for (size_t i = 0; i < segs.size(); ++i) {
    if (!isParam(segs[i])) continue;
    const std::string name(segs[i].substr(1, segs[i].size() - 2));
    const std::string kind = i > 0 && !isParam(segs[i - 1]) ? singular(segs[i - 1]) : name;
    auto it = params.find(name);
    object += (object.empty() ? "" : "/") + kind + ":" + (it == params.end() ? "" : it->second);
  }
  if (!object.empty() || !reply.is_object() || segs.empty()) return object;

  const std::string kind = singular(segs.back());
  if (reply.contains("id") && !idText(reply["id"]).empty()) return kind + ":" + idText(reply["id"]);
  // An SSH key is known by its fingerprint (POST /ssh-keys).
  if (reply.contains("fingerprint") && !idText(reply["fingerprint"]).empty())
    return kind + ":" + idText(reply["fingerprint"]);
  if (reply.contains("name") && reply["name"].is_string()) {
    const std::string name = reply["name"].get<std::string>();
    // A project is named within its team, as in the routes under /teams/{team}/projects.
    if (kind == "project" && reply.contains("team") && reply["team"].is_string())
      return "team:" + reply["team"].get<std::string>() + "/project:" + name;
    return kind + ":" + name;
  }
  for (const auto& item : reply.items()) {
    const json& value = item.value();
    if (!value.is_object()) continue;
    for (const char* field : {"id", "name"}) {
      if (value.contains(field) && !idText(value[field]).empty())
        return item.key() + ":" + idText(value[field]);
    }
  }
  return "";
}

std::optional<std::string> auditSnapshotPath(const Router& router, std::string_view path,
                                             const std::string& pattern) {
  const auto patternSegs = splitPath(pattern);
  const auto pathSegs = splitPath(path);
  if (patternSegs.size() != pathSegs.size()) return std::nullopt;
  auto firstParam = std::find_if(patternSegs.begin(), patternSegs.end(), isParam);
  if (firstParam == patternSegs.end()) return std::nullopt;
  const size_t shortest = static_cast<size_t>(firstParam - patternSegs.begin()) + 1;
  for (size_t n = pathSegs.size(); n >= shortest; --n) {
    std::string prefix;
    for (size_t i = 0; i < n; ++i) prefix += "/" + std::string(pathSegs[i]);
    if (router.match(http::verb::get, prefix).route) return prefix;
  }
  return std::nullopt;
}

bool AuditCapture::audited(const Route& route) {
  return route.method != http::verb::get && route.method != http::verb::head &&
         route.method != http::verb::options;
}

boost::asio::awaitable<AuditCapture> AuditCapture::begin(const Router& router, const Route& route,
                                                         const ApiRequest& req,
                                                         std::string_view path, std::string address,
                                                         TimeMs now) {
  AuditCapture c;
  c.pattern_ = route.pattern;
  c.params_ = req.params;
  model::AuditEntry& e = c.entry_;
  e.at = now;
  e.address = std::move(address);
  e.action = std::string(http::to_string(route.method)) + " " + route.pattern;
  // The body is read only for a request that succeeded (finish): an unauthenticated request
  // that fails (a bad login, a bad join) costs no parse here.
  c.body_ = &req.raw.body();
  c.bodyIsJson_ = &req.bodyIsJson;
  if (req.principal && req.principal->kind == control::Principal::Kind::kHost) {
    e.actor = "host:" + req.principal->name;
    e.actorKind = "host";
  } else if (req.principal) {
    e.actor = req.principal->name;
    e.actorKind = "user";
  }
  c.snapshotPath_ = auditSnapshotPath(router, path, route.pattern);
  // Plain statements around co_await: GCC 12 mishandles temporaries inside co_await expressions.
  if (c.snapshotPath_) {
    json before = co_await readResource(router, *c.snapshotPath_);
    e.before = dumpRedacted(std::move(before));
  }
  co_return c;
}

boost::asio::awaitable<std::optional<model::AuditEntry>> AuditCapture::finish(
    const Router& router, const ApiResponse& reply) {
  if (!isSuccess(reply.status)) co_return std::nullopt;
  model::AuditEntry e = std::move(entry_);
  e.status = static_cast<int>(reply.status);
  // A body that is valid JSON and names nothing secret is kept as sent, without a parse (the
  // audited write of every job submission passes here).
  const bool isJson = *bodyIsJson_ || (jsonNestingWithin(*body_) && json::accept(*body_));
  const bool keptAsSent =
      !e.actor.empty() && !body_->empty() && !textMayNameSecrets(*body_) && isJson;
  if (keptAsSent) {
    e.request = *body_;
  } else {
    const json body = parseOrNull(*body_);
    if (e.actor.empty()) {  // no principal: an anonymous request, or a host joining
      const bool joining =
          body.is_object() && body.contains("join_token") && body["join_token"].is_string();
      // A join token's id (before '_') names who let the host in; the rest is secret.
      const std::string token = joining ? body["join_token"].get<std::string>() : "";
      e.actor = joining ? "join:" + token.substr(0, token.find('_')) : "anonymous";
      e.actorKind = joining ? "join" : "anonymous";
    }
    e.request = dumpRedacted(body);
  }
  // The reply as a document, made only where it is read: a body written as text (shownId) names
  // its object itself, and is kept as sent when it names nothing secret.
  std::shared_ptr<const json> parsed;
  auto replied = [&]() -> const json& {
    if (!parsed) parsed = replyJson(reply);
    return *parsed;
  };
  e.object = reply.shownId ? auditObjectOf(pattern_, params_, json{{"id", *reply.shownId}})
                           : auditObjectOf(pattern_, params_, replied());
  if (snapshotPath_) {
    json after = co_await readResource(router, *snapshotPath_);
    e.after = dumpRedacted(std::move(after));
  } else {
    const std::string* dumped = reply.value || reply.shownId ? &reply.body : nullptr;
    e.after = dumped && !textMayNameSecrets(*dumped) ? *dumped : keptText(replied(), dumped);
  }
  co_return e;
}

}  // namespace allot::api
