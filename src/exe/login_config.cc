#include "exe/login_config.h"

#include <arpa/inet.h>

#include <fstream>
#include <string>
#include <string_view>

#include "common/time_format.h"

namespace allot {
namespace {

Status readDuration(const toml::table& section, const char* prefix, const char* key, int64_t& out) {
  auto text = section[key].value<std::string>();
  if (!text) return Status::Ok();
  auto ms = parseDurationMs(*text);
  if (!ms.ok() || *ms <= 0)
    return Status::InvalidArgument(std::string(prefix) + key +
                                   ": expected a duration such as 30d or 15m, got '" + *text + "'");
  out = *ms;
  return Status::Ok();
}

Status readCount(const toml::table& section, const char* prefix, const char* key, int64_t lo,
                 int64_t hi, int64_t& out) {
  auto v = section[key].value<int64_t>();
  if (!v) return Status::Ok();
  if (*v < lo || *v > hi)
    return Status::InvalidArgument(std::string(prefix) + key + ": expected " + std::to_string(lo) +
                                   " to " + std::to_string(hi));
  out = *v;
  return Status::Ok();
}

Status readLogin(const toml::table& s, auth::LoginConfig& out) {
  const char* p = "login.";
  ALLOT_RETURN_IF_ERROR(readDuration(s, p, "token_ttl", out.cliTokenTtlMs));
  ALLOT_RETURN_IF_ERROR(readDuration(s, p, "session_lifetime", out.sessionLifetimeMs));
  ALLOT_RETURN_IF_ERROR(readDuration(s, p, "session_idle_timeout", out.sessionIdleMs));
  int64_t accountMax = out.accountLimit.maxFailures, addressMax = out.addressLimit.maxFailures;
  ALLOT_RETURN_IF_ERROR(readCount(s, p, "max_failures_per_account", 1, 1000, accountMax));
  ALLOT_RETURN_IF_ERROR(readCount(s, p, "max_failures_per_address", 1, 100000, addressMax));
  out.accountLimit.maxFailures = static_cast<int>(accountMax);
  out.addressLimit.maxFailures = static_cast<int>(addressMax);
  int64_t window = out.accountLimit.windowMs;
  ALLOT_RETURN_IF_ERROR(readDuration(s, p, "failure_window", window));
  out.accountLimit.windowMs = out.addressLimit.windowMs = window;
  int64_t workers = static_cast<int64_t>(out.hashWorkers),
          queue = static_cast<int64_t>(out.hashQueue);
  ALLOT_RETURN_IF_ERROR(readCount(s, p, "hash_workers", 1, 64, workers));
  ALLOT_RETURN_IF_ERROR(readCount(s, p, "hash_queue", 1, 10000, queue));
  out.hashWorkers = static_cast<size_t>(workers);
  out.hashQueue = static_cast<size_t>(queue);
  out.secureCookies = s["secure_cookies"].value_or(out.secureCookies);
  return Status::Ok();
}

// The host of an ldap:// url ("" when it has none): up to its port or path, an IPv6 literal
// without its brackets.
std::string ldapHost(std::string_view url) {
  url.remove_prefix(std::string_view("ldap://").size());
  if (url.starts_with('[')) {
    const auto end = url.find(']');
    return end == std::string_view::npos ? std::string() : std::string(url.substr(1, end - 1));
  }
  return std::string(url.substr(0, url.find_first_of(":/")));
}

bool isLoopbackHost(const std::string& host) {
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return host == "localhost" || host == "::1";
}

Status readLdap(const toml::table& s, auth::LdapConfig& out) {
  out.url = s["url"].value_or(out.url);
  if (out.url.rfind("ldap://", 0) != 0 && out.url.rfind("ldaps://", 0) != 0)
    return Status::InvalidArgument("ldap.url: expected ldap://HOST[:PORT] or ldaps://...");
  out.startTls = s["start_tls"].value_or(out.startTls);
  // libldap takes a list of urls, tried in turn: one url here, so that the one checked below is
  // the only one used.
  if (out.url.find_first_of(", \t") != std::string::npos)
    return Status::InvalidArgument("ldap.url: one url, without spaces or commas");
  // Every login sends a user's password to the directory, and every search the service
  // account's: over plain ldap:// to another machine, anyone on the path reads them. So that takes
  // StartTLS, or saying so.
  const bool plaintext = s["allow_plaintext"].value_or(false);
  if (out.url.rfind("ldap://", 0) == 0 && !out.startTls && !plaintext &&
      !isLoopbackHost(ldapHost(out.url)))
    return Status::InvalidArgument(
        "ldap.url: " + out.url +
        " would carry passwords in the clear; use ldaps://, set start_tls = true, or set "
        "allow_plaintext = true on a network where that is acceptable");
  out.bindDn = s["bind_dn"].value_or(out.bindDn);
  auto password = s["bind_password"].value<std::string>();
  auto passwordFile = s["bind_password_file"].value<std::string>();
  if (password && passwordFile)
    return Status::InvalidArgument("ldap: set bind_password or bind_password_file, not both");
  if (passwordFile) {
    std::ifstream in(*passwordFile);
    if (!in || !std::getline(in, out.bindPassword))
      return Status::InvalidArgument("ldap.bind_password_file: cannot read " + *passwordFile);
  } else if (password) {
    out.bindPassword = *password;
  }
  out.userBase = s["user_base"].value_or(out.userBase);
  out.userFilter = s["user_filter"].value_or(out.userFilter);
  out.groupBase = s["group_base"].value_or(out.groupBase);
  out.groupFilter = s["group_filter"].value_or(out.groupFilter);
  out.groupNameAttribute = s["group_name_attribute"].value_or(out.groupNameAttribute);
  if (out.bindDn.empty() || out.userBase.empty())
    return Status::InvalidArgument("ldap: bind_dn and user_base are required");
  if (out.userFilter.find("{user}") == std::string::npos)
    return Status::InvalidArgument("ldap.user_filter: must contain {user}");
  if (const toml::array* admins = s["platform_admin_groups"].as_array()) {
    for (const auto& g : *admins) {
      auto v = g.value<std::string>();
      if (!v) return Status::InvalidArgument("ldap.platform_admin_groups: expected strings");
      out.platformAdminGroups.push_back(*v);
    }
  }
  // [ldap.groups] "ml-users" = "ml:member", or a list of such for a group granting several.
  if (const toml::table* groups = s["groups"].as_table()) {
    for (const auto& [group, node] : *groups) {
      const std::string key = "ldap.groups." + std::string(group.str());
      std::vector<std::string> grants;
      if (auto one = node.value<std::string>()) {
        grants.push_back(*one);
      } else if (const toml::array* many = node.as_array()) {
        for (const auto& g : *many) grants.push_back(g.value_or(std::string()));
      } else {
        return Status::InvalidArgument(key + ": expected \"team:role\" or a list of them");
      }
      for (const auto& text : grants) {
        auto grant = auth::parseTeamRole(text);
        if (!grant.ok()) return Status::InvalidArgument(key + ": " + grant.status().message());
        out.groups[std::string(group.str())].push_back(*grant);
      }
    }
  }
  int64_t net = out.networkTimeoutMs, op = out.operationTimeoutMs;
  ALLOT_RETURN_IF_ERROR(readDuration(s, "ldap.", "network_timeout", net));
  ALLOT_RETURN_IF_ERROR(readDuration(s, "ldap.", "timeout", op));
  ALLOT_RETURN_IF_ERROR(readDuration(s, "ldap.", "recheck_interval", out.recheckIntervalMs));
  out.networkTimeoutMs = static_cast<int>(net);
  out.operationTimeoutMs = static_cast<int>(op);
  return Status::Ok();
}

}  // namespace

Status readLoginConfig(const toml::table& tbl, auth::LoginConfig& out) {
  if (const toml::table* login = tbl["login"].as_table())
    ALLOT_RETURN_IF_ERROR(readLogin(*login, out));
  if (const toml::table* ldap = tbl["ldap"].as_table())
    ALLOT_RETURN_IF_ERROR(readLdap(*ldap, out.ldap));
  return Status::Ok();
}

}  // namespace allot
