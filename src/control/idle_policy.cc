#include "control/idle_policy.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/http_url.h"
#include "common/time_format.h"

namespace allot::control {
namespace {

constexpr int64_t kMaxDurationMs = 30LL * 24 * 3'600'000;  // 30 days
constexpr size_t kMaxWebhookLength = 2048;

std::string percentText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

const char* policySourceName(PolicySource s) {
  switch (s) {
    case PolicySource::kPlatform:
      return "platform";
    case PolicySource::kTeam:
      return "team";
    case PolicySource::kProject:
      return "project";
  }
  return "?";
}

EffectiveIdlePolicy effectiveIdlePolicy(const model::IdlePolicy& platform, const model::Team* team,
                                        const model::Project* project) {
  if (project && project->idlePolicy) return {*project->idlePolicy, PolicySource::kProject};
  if (team && team->idlePolicy) return {*team->idlePolicy, PolicySource::kTeam};
  return {platform, PolicySource::kPlatform};
}

Status validateIdlePolicy(const model::IdlePolicy& p) {
  // !(x >= 0) also refuses NaN.
  if (!(p.thresholdPct >= 0) || p.thresholdPct > 100)
    return Status::InvalidArgument(
        "threshold_percent: must be between 0 and 100, got " + percentText(p.thresholdPct),
        "threshold_percent");
  if (p.afterMs <= 0 || p.afterMs > kMaxDurationMs)
    return Status::InvalidArgument(
        "after: must be above 0 and at most 30d, got '" + formatDurationSpec(p.afterMs) + "'",
        "after");
  if (p.graceMs < 0 || p.graceMs > kMaxDurationMs)
    return Status::InvalidArgument("grace: must be between 0s and 30d", "grace");
  if (!p.webhook.empty()) {
    auto t = parseWebhookUrl(p.webhook);
    if (!t.ok()) return t.status();
  }
  return Status::Ok();
}

Result<WebhookTarget> parseWebhookUrl(const std::string& url) {
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument("webhook: " + why, "webhook");
  };
  if (url.size() > kMaxWebhookLength)
    return bad("longer than " + std::to_string(kMaxWebhookLength) + " characters");
  for (unsigned char c : url) {
    if (c <= 0x20 || c >= 0x7f) return bad("must be printable ASCII without spaces");
  }
  // The URL itself is never echoed: it may carry a secret.
  auto u = parseHttpUrl(url);
  if (!u.ok()) return bad(u.status().message());
  if (u->scheme != "http")
    return bad("must start with http:// (allotd has no TLS client; use a local relay for https)");
  if (u->hasFragment) return bad("must not have a #fragment");
  if (u->hasUserinfo)
    return bad("must not carry user:password@ (put a secret in the path or query instead)");
  if (u->ipv6 || u->host.front() == '[')
    return bad("IPv6 literals are not supported; use a host name");
  if (u->host.size() > 253) return bad("needs a host");
  for (char c : u->host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.')
      return bad("host has a character other than letters, digits, '-' and '.'");
  }
  WebhookTarget t;
  t.host = u->host;
  if (u->port) t.port = *u->port;
  t.target = (u->path.empty() ? "/" : u->path) + (u->hasQuery ? "?" + u->query : "");
  return t;
}

IdleStep stepIdle(IdleTrack& t, const model::IdlePolicy& p, TimeMs now) {
  if (!t.flagged()) {
    if (now - t.lastBusyAt < p.afterMs) return IdleStep::kNone;
    t.idleSince = t.lastBusyAt;
    t.notifiedAt = now;
    t.reclaimAt = p.action == model::IdleAction::kReclaim ? now + p.graceMs : 0;
    t.reclaimed = false;
    return IdleStep::kFlag;
  }
  if (t.lastBusyAt > t.idleSince) {
    t.idleSince = t.notifiedAt = t.reclaimAt = 0;
    t.reclaimed = false;
    return IdleStep::kBusyAgain;
  }
  // The policy may change while a job is flagged: a new reclaim policy counts its grace from
  // now (its owners were told only of a notification), a notify policy cancels a pending reclaim.
  if (p.action != model::IdleAction::kReclaim) {
    t.reclaimAt = 0;
    return IdleStep::kNone;
  }
  if (t.reclaimAt == 0) t.reclaimAt = now + p.graceMs;
  if (!t.reclaimed && now >= t.reclaimAt) {
    t.reclaimed = true;
    return IdleStep::kReclaim;
  }
  return IdleStep::kNone;
}

std::string describeIdle(const model::IdlePolicy& p) {
  return "GPUs under " + percentText(p.thresholdPct) + "% for " + formatDurationSpec(p.afterMs);
}

bool webhookAllowed(const std::vector<std::string>& allow, const std::string& url) {
  // A path that a receiver would resolve elsewhere ("/allot/../admin", or the same spelt with
  // %2e and %2f) could leave an allowed prefix: refused whatever the list says.
  std::string lower = url;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string path = lower.substr(std::min(lower.size(), lower.find('/', 7)));
  for (const char* bad : {"/./", "/../", "%2e", "%2f", "%5c", "\\"}) {
    if (path.find(bad) != std::string::npos) return false;
  }
  auto endsWith = [&](std::string_view tail) {
    return path.size() >= tail.size() &&
           path.compare(path.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (endsWith("/..") || endsWith("/.")) return false;
  // Each prefix ends in '/' after its host (checked when allotd reads its config), so a prefix
  // "http://hooks.example.com/" cannot match "http://hooks.example.com.evil.net/".
  return std::any_of(allow.begin(), allow.end(),
                     [&](const std::string& p) { return !p.empty() && url.rfind(p, 0) == 0; });
}

}  // namespace allot::control
