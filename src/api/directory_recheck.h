#pragma once
// Directory users' teams read again from the directory while they hold tokens, every
// [ldap] recheck_interval (directory_recheck.cc).

#include <boost/asio/awaitable.hpp>

namespace allot::api {

class Server;

// Runs on allotd's I/O thread for as long as it does; only when a directory is configured.
boost::asio::awaitable<void> recheckDirectoryUsers(Server& server);

}  // namespace allot::api
