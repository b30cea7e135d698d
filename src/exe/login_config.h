#pragma once
// allotd.toml's [login] and [ldap] sections: passwords, console sessions, failure limits and
// directory logins (auth::LoginConfig; docs/login.md, deploy/allotd.example.toml).

#include <toml++/toml.h>

#include "auth/login_config.h"
#include "common/status.h"

namespace allot {

// Reads the sections into `out` (keys absent keep its defaults). The LDAP bind password comes
// from bind_password or from the file bind_password_file names (first line). An error names the
// key ("ldap.url: ...") and never holds the password.
Status readLoginConfig(const toml::table& tbl, auth::LoginConfig& out);

}  // namespace allot
