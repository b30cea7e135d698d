// The directory users' teams, read again while they hold tokens (docs/login.md, "LDAP"): a login
// sets a directory user's teams from their groups, and without this a user taken out of a group
// kept what it granted through the tokens already issued, until they logged in again.

#include "api/directory_recheck.h"

#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "api/server.h"
#include "auth/directory.h"

namespace allot::api {

namespace asio = boost::asio;

namespace {

// Whether `name` is still a directory user whose tokens grant something: the lookup took a
// worker's time, and an admin may have disabled or removed the account meanwhile (a sync would
// make a removed one again).
bool stillToRecheck(Server& s, const std::string& name) {
  const auto& users = s.cluster().world().users;
  auto it = users.find(name);
  return it != users.end() && it->second.source == model::UserSource::kLdap && !it->second.disabled;
}

// One user: their teams as the directory grants them now, or nothing when it grants none. Only
// a search that worked and found no entry says the user is gone: a directory that cannot be
// asked, a missing base (a restore, an edit) or several entries change nothing, and the next
// round tries again.
asio::awaitable<void> recheckUser(Server& s, const std::string& name) {
  auto found = co_await s.login().directoryLookup(name);
  if (!found.ok() && found.status().code() != Code::kNotFound) {
    spdlog::warn("directory recheck of '{}': {}", name, found.status().message());
    co_return;
  }
  if (!stillToRecheck(s, name)) co_return;
  std::optional<control::DirectoryLogin> grants;
  if (found.ok()) {
    auto access = auth::mapGroups(s.login().config().ldap, *found);
    if (access.ok())
      grants = control::DirectoryLogin{name, access->teams, access->platformAdmin, found->uid,
                                       found->gid};
  }
  if (grants) {
    auto synced = s.cluster().access().syncDirectoryUser(*grants);
    if (synced.ok()) {
      co_await s.apply(*synced);
      co_return;
    }
    // A disabled account stays as it is; so does one whose new ids clash (logged).
    if (synced.status().code() != Code::kPermissionDenied) {
      spdlog::warn("directory recheck of '{}': {}", name, synced.status().message());
      co_return;
    }
    // The groups name only teams Allot lacks: nothing is granted.
  }
  auto withdrawn = s.cluster().access().withdrawDirectoryUser(name);
  if (!withdrawn.ok()) co_return;  // gone meanwhile, or no longer a directory user
  spdlog::info("directory recheck: '{}' is {} in the directory; its teams and tokens end", name,
               found.ok() ? "in no group that grants a team" : "no longer found");
  co_await s.apply(*withdrawn);
}

}  // namespace

asio::awaitable<void> recheckDirectoryUsers(Server& s) {
  asio::steady_timer timer(s.io());
  const auto interval = std::chrono::milliseconds(s.login().config().ldap.recheckIntervalMs);
  for (;;) {
    timer.expires_after(interval);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    // One at a time: each lookup takes a worker of the pool that logins use too.
    for (const std::string& name : s.cluster().access().directoryUsersWithTokens())
      co_await recheckUser(s, name);
  }
}

}  // namespace allot::api
