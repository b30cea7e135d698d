#pragma once
// Origins of their own for sessions (docs/sessions.md, "Origins"; docs/access.md, threat model).
//
// A session's pages are its owner's code: a Jupyter server, extensions and notebooks they wrote
// or installed. Served from allotd's own origin, a script in them would run with the rights of
// whoever opens the session (read the console's CSRF token, mint API tokens as the visitor).
// So session N is served only at its own origin, http(s)://sN.<session domain>[:port], where
// allotd answers nothing but /sessions/N/...: no API, no console, no other session. With
// `allotd --session-domain sessions.example.com` (wildcard DNS and certificate for
// *.sessions.example.com) that is sN.sessions.example.com; the default, "localhost", gives
// sN.localhost, which browsers resolve to the loopback address: `make run` works unchanged.
//
// The console's cookie is host-only, so it never reaches a session's origin. A browser that
// follows a link to /sessions/N/ on the console's origin (with the console's cookie) is sent on
// with a handoff: a one-time ticket, good for a minute, that the session's origin redeems for a
// cookie of its own (SessionOriginAccess: HttpOnly, Path=/sessions/N/, SameSite=Lax) standing
// for the console session. Logging out or an idle console session ends both. A
// cookie-authenticated request to a session on the console's origin that is not such a
// navigation (a write, a WebSocket) is refused there. Bearer tokens (the CLI, scripts) work on
// either origin: no browser sends them on its own.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"

namespace allot::api {

inline constexpr std::string_view kDefaultSessionDomain = "localhost";

struct SessionOrigins {
  std::string domain = std::string(kDefaultSessionDomain);  // sessions live at s<id>.<domain>
  bool https = false;                                       // allotd serves TLS
  bool configured = false;  // not the default (else only consoles on loopback hand off)
};

// The session a Host header names ("s12.localhost:7070" under "localhost" -> 12); 0 for none.
int64_t sessionOfHost(std::string_view host, std::string_view domain);

// Session id's origin, on the port of `consoleHost` (the Host the console was reached at, whose
// port the browser could use): "http://s12.localhost:7070".
std::string sessionOrigin(int64_t id, const SessionOrigins& origins, std::string_view consoleHost);

// The console's origin seen from a session's (`sessionHost`, its Host header): known only under
// the default domain, where the console is localhost on the same port; nullopt under a
// configured one, where the console may be anywhere.
std::optional<std::string> consoleOrigin(const SessionOrigins& origins,
                                         std::string_view sessionHost);

// Where the handoff lands on a session's origin, under its base URL.
inline constexpr std::string_view kHandoffPath = "_allot/handoff";
// The cookie a session's origin keeps (never the console's, whose name it ignores there).
inline constexpr const char* kOriginCookie = "allot_origin";

// Whether `host` (a Host header) names this machine: localhost, *.localhost, 127.0.0.0/8, [::1].
bool isLoopbackHost(std::string_view host);

// The handoff's state, in memory (a restart only means opening the session again from the
// console). Tickets are one-time and short; what a ticket is redeemed for is a credential of the
// session's origin alone: a random value that allotd maps to the console session behind it, never
// that session's secret. So whatever a session's own code manages to see on its origin (a
// service worker in the path of the handoff, say) is good for that session and nothing else.
class SessionOriginAccess {
 public:
  static constexpr int64_t kTicketLifetimeMs = 60'000;
  // Bounds against a flood of links: per console session, and in all.
  static constexpr size_t kMaxTicketsPerConsole = 16;
  static constexpr size_t kMaxEntries = 100'000;

  // A ticket for `session` that stands for the console session `consoleSecret`.
  std::string mintTicket(int64_t session, const std::string& consoleSecret, TimeMs now);
  // Spends the ticket (whether or not it matches); for a valid one, a new origin credential good
  // for `lifetimeMs`. nullopt for an unknown, spent or expired ticket, or another session's.
  std::optional<std::string> redeem(std::string_view ticket, int64_t session, TimeMs now,
                                    int64_t lifetimeMs);
  // The console session behind an origin credential of `session`'s; nullopt for anything else.
  std::optional<std::string> consoleSecretOf(std::string_view credential, int64_t session,
                                             TimeMs now) const;

  size_t tickets() const { return tickets_.size(); }
  size_t credentials() const { return credentials_.size(); }

 private:
  struct Grant {
    int64_t session = 0;
    std::string consoleSecret;
    TimeMs expiresAt = 0;
  };
  using Grants = std::map<std::string, Grant, std::less<>>;
  static void makeRoom(Grants& grants, TimeMs now);
  Grants tickets_;
  Grants credentials_;
};

}  // namespace allot::api
