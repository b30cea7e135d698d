#include "api/session_origin.h"

#include <cctype>
#include <charconv>
#include <utility>

#include "common/ascii.h"
#include "common/secrets.h"

namespace allot::api {

namespace {

// A Host header's name and port ("" when it has none). An IPv6 literal keeps its brackets.
std::pair<std::string_view, std::string_view> splitHost(std::string_view host) {
  const size_t colon = host.rfind(':');
  if (colon == std::string_view::npos || host.find(']', colon) != std::string_view::npos)
    return {host, {}};
  return {host.substr(0, colon), host.substr(colon + 1)};
}

}  // namespace

int64_t sessionOfHost(std::string_view host, std::string_view domain) {
  const std::string_view name = splitHost(host).first;
  // "s<id>." then the domain, in any case (host names are case-insensitive).
  if (domain.empty() || name.size() < domain.size() + 3 ||
      std::tolower(static_cast<unsigned char>(name.front())) != 's' ||
      name[name.size() - domain.size() - 1] != '.' ||
      !asciiIEquals(name.substr(name.size() - domain.size()), domain))
    return 0;
  const std::string_view digits = name.substr(1, name.size() - domain.size() - 2);
  int64_t id = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (ec != std::errc() || p != digits.data() + digits.size() || id <= 0 || digits[0] == '0')
    return 0;
  return id;
}

std::string sessionOrigin(int64_t id, const SessionOrigins& origins, std::string_view consoleHost) {
  // Only a port: whatever else a Host header carries stays out of the URL.
  const std::string_view port = splitHost(consoleHost).second;
  const bool numeric = !port.empty() && port.size() <= 5 &&
                       port.find_first_not_of("0123456789") == std::string_view::npos;
  return std::string(origins.https ? "https://" : "http://") + "s" + std::to_string(id) + "." +
         origins.domain + (numeric ? ":" + std::string(port) : "");
}

std::optional<std::string> consoleOrigin(const SessionOrigins& origins,
                                         std::string_view sessionHost) {
  if (origins.configured) return std::nullopt;
  const std::string_view port = splitHost(sessionHost).second;
  const bool numeric = !port.empty() && port.size() <= 5 &&
                       port.find_first_not_of("0123456789") == std::string_view::npos;
  return std::string(origins.https ? "https://" : "http://") + "localhost" +
         (numeric ? ":" + std::string(port) : "");
}

bool isLoopbackHost(std::string_view host) {
  const std::string_view name = splitHost(host).first;
  const std::string_view localhost = "localhost";
  return name == "[::1]" || asciiIEquals(name, localhost) ||
         (name.size() > localhost.size() + 1 && name[name.size() - localhost.size() - 1] == '.' &&
          asciiIEquals(name.substr(name.size() - localhost.size()), localhost)) ||
         name.rfind("127.", 0) == 0;
}

void SessionOriginAccess::makeRoom(Grants& grants, TimeMs now) {
  std::erase_if(grants, [now](const auto& kv) { return kv.second.expiresAt <= now; });
  if (grants.size() >= kMaxEntries) grants.erase(grants.begin());  // one, at random, makes way
}

std::string SessionOriginAccess::mintTicket(int64_t session, const std::string& consoleSecret,
                                            TimeMs now) {
  makeRoom(tickets_, now);
  // A console session's own oldest-to-expire ticket makes way for its next: one user's flood of
  // links spends only their own tickets.
  auto oldest = tickets_.end();
  size_t held = 0;
  for (auto it = tickets_.begin(); it != tickets_.end(); ++it) {
    if (it->second.consoleSecret != consoleSecret) continue;
    ++held;
    if (oldest == tickets_.end() || it->second.expiresAt < oldest->second.expiresAt) oldest = it;
  }
  if (held >= kMaxTicketsPerConsole) tickets_.erase(oldest);
  std::string ticket = newToken("handoff");  // URL-safe: it travels in a query string
  tickets_[ticket] = Grant{session, consoleSecret, now + kTicketLifetimeMs};
  return ticket;
}

std::optional<std::string> SessionOriginAccess::redeem(std::string_view ticket, int64_t session,
                                                       TimeMs now, int64_t lifetimeMs) {
  auto it = tickets_.find(ticket);
  if (it == tickets_.end()) return std::nullopt;
  Grant t = std::move(it->second);
  tickets_.erase(it);
  if (t.session != session || t.expiresAt <= now) return std::nullopt;
  makeRoom(credentials_, now);
  std::string credential = newToken("origin");
  t.expiresAt = now + lifetimeMs;
  credentials_[credential] = std::move(t);
  return credential;
}

std::optional<std::string> SessionOriginAccess::consoleSecretOf(std::string_view credential,
                                                                int64_t session, TimeMs now) const {
  auto it = credentials_.find(credential);
  if (it == credentials_.end() || it->second.session != session || it->second.expiresAt <= now)
    return std::nullopt;
  return it->second.consoleSecret;
}

}  // namespace allot::api
