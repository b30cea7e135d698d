#include "api/session_origin.h"

#include <cctype>
#include <charconv>

#include "common/secrets.h"

namespace allot::api {

int64_t sessionOfHost(std::string_view host, std::string_view domain) {
  // Strip the port (no IPv6 literal is a session host).
  if (const size_t colon = host.rfind(':');
      colon != std::string_view::npos && host.find(']') == std::string_view::npos)
    host = host.substr(0, colon);
  if (domain.empty() || host.size() < domain.size() + 3 ||
      std::tolower(static_cast<unsigned char>(host.front())) != 's')
    return 0;
  const std::string_view suffix = host.substr(host.size() - domain.size());
  if (host[host.size() - domain.size() - 1] != '.') return 0;
  // Host names are case-insensitive.
  for (size_t i = 0; i < domain.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(suffix[i])) !=
        std::tolower(static_cast<unsigned char>(domain[i])))
      return 0;
  }
  const std::string_view digits = host.substr(1, host.size() - domain.size() - 2);
  int64_t id = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (ec != std::errc() || p != digits.data() + digits.size() || id <= 0 || digits[0] == '0')
    return 0;
  return id;
}

std::string sessionOrigin(int64_t id, const SessionOrigins& origins, std::string_view consoleHost) {
  std::string port;
  if (const size_t colon = consoleHost.rfind(':');
      colon != std::string_view::npos && consoleHost.find(']', colon) == std::string_view::npos) {
    const std::string_view digits = consoleHost.substr(colon + 1);
    // Only a port: whatever else a Host header carries stays out of the URL.
    if (!digits.empty() && digits.size() <= 5 &&
        digits.find_first_not_of("0123456789") == std::string_view::npos)
      port = ":" + std::string(digits);
  }
  return std::string(origins.https ? "https://" : "http://") + "s" + std::to_string(id) + "." +
         origins.domain + port;
}

bool isLoopbackHost(std::string_view host) {
  if (host.rfind("[::1]", 0) == 0) return true;
  if (const size_t colon = host.rfind(':'); colon != std::string_view::npos)
    host = host.substr(0, colon);
  std::string h(host);
  for (auto& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return h == "localhost" || h.ends_with(".localhost") || h.rfind("127.", 0) == 0;
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
