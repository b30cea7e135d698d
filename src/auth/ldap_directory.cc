#include "auth/ldap_directory.h"

#include <ldap.h>
#include <sys/time.h>

#include <memory>

namespace allot::auth {
namespace {

struct LdapCloser {
  void operator()(LDAP* ld) const { ldap_unbind_ext_s(ld, nullptr, nullptr); }
};
using LdapHandle = std::unique_ptr<LDAP, LdapCloser>;
struct MessageFreer {
  void operator()(LDAPMessage* m) const { ldap_msgfree(m); }
};

timeval toTimeval(int ms) { return timeval{ms / 1000, (ms % 1000) * 1000}; }

const Status kInvalidLogin = Status::Unauthenticated("invalid user name or password");

Result<LdapHandle> connect(const LdapConfig& c) {
  LDAP* raw = nullptr;
  if (int rc = ldap_initialize(&raw, c.url.c_str()); rc != LDAP_SUCCESS)
    return Status::Unavailable("ldap: bad url '" + c.url + "': " + ldap_err2string(rc));
  LdapHandle ld(raw);
  int version = LDAP_VERSION3;
  ldap_set_option(ld.get(), LDAP_OPT_PROTOCOL_VERSION, &version);
  ldap_set_option(ld.get(), LDAP_OPT_REFERRALS, LDAP_OPT_OFF);
  timeval net = toTimeval(c.networkTimeoutMs), op = toTimeval(c.operationTimeoutMs);
  ldap_set_option(ld.get(), LDAP_OPT_NETWORK_TIMEOUT, &net);
  ldap_set_option(ld.get(), LDAP_OPT_TIMEOUT, &op);
  if (c.startTls) {
    if (int rc = ldap_start_tls_s(ld.get(), nullptr, nullptr); rc != LDAP_SUCCESS)
      return Status::Unavailable("ldap: StartTLS with " + c.url +
                                 " failed: " + ldap_err2string(rc));
  }
  return ld;
}

int simpleBind(LDAP* ld, const std::string& dn, const std::string& password) {
  berval cred{static_cast<ber_len_t>(password.size()), const_cast<char*>(password.data())};
  return ldap_sasl_bind_s(ld, dn.c_str(), LDAP_SASL_SIMPLE, &cred, nullptr, nullptr, nullptr);
}

std::vector<std::string> values(LDAP* ld, LDAPMessage* entry, const char* attr) {
  std::vector<std::string> out;
  berval** vals = ldap_get_values_len(ld, entry, attr);
  if (!vals) return out;
  for (int i = 0; vals[i]; ++i) out.emplace_back(vals[i]->bv_val, vals[i]->bv_len);
  ldap_value_free_len(vals);
  return out;
}

int64_t number(LDAP* ld, LDAPMessage* entry, const char* attr) {
  auto v = values(ld, entry, attr);
  if (v.empty()) return -1;
  try {
    return std::stoll(v[0]);
  } catch (const std::exception&) {
    return -1;
  }
}

std::string entryDn(LDAP* ld, LDAPMessage* entry) {
  char* dn = ldap_get_dn(ld, entry);
  std::string out = dn ? dn : "";
  ldap_memfree(dn);
  return out;
}

Result<std::unique_ptr<LDAPMessage, MessageFreer>> search(
    LDAP* ld, const LdapConfig& c, const std::string& base, const std::string& filter,
    std::vector<const char*> attrs, int sizeLimit, bool* baseMissing = nullptr) {
  attrs.push_back(nullptr);
  timeval op = toTimeval(c.operationTimeoutMs);
  LDAPMessage* res = nullptr;
  int rc = ldap_search_ext_s(ld, base.c_str(), LDAP_SCOPE_SUBTREE, filter.c_str(),
                             const_cast<char**>(attrs.data()), 0, nullptr, nullptr, &op, sizeLimit,
                             &res);
  std::unique_ptr<LDAPMessage, MessageFreer> owned(res);
  if (rc != LDAP_SUCCESS && rc != LDAP_SIZELIMIT_EXCEEDED && rc != LDAP_NO_SUCH_OBJECT)
    return Status::Unavailable("ldap: search under '" + base + "' failed: " + ldap_err2string(rc));
  if (rc == LDAP_SIZELIMIT_EXCEEDED) return Status::Unauthenticated("several entries match");
  if (baseMissing != nullptr) *baseMissing = rc == LDAP_NO_SUCH_OBJECT;
  return owned;
}

// A connection bound as the service account.
Result<LdapHandle> serviceConnection(const LdapConfig& c) {
  auto service = connect(c);
  if (!service.ok()) return service.status();
  if (int rc = simpleBind(service->get(), c.bindDn, c.bindPassword); rc != LDAP_SUCCESS)
    return Status::Unavailable("ldap: the service account '" + c.bindDn +
                               "' cannot bind: " + ldap_err2string(rc));
  return service;
}

// The user's one entry: its DN and ids, and memberOf when groups are read from it. NotFound
// only when the search worked and found none; Unauthenticated when it found several; Unavailable
// when the search failed or its base is not there (a restore or an edit under way says nothing
// of whether the user is).
Result<DirectoryUser> findUser(LDAP* service, const LdapConfig& c, const std::string& user) {
  DirectoryUser out;
  out.name = user;
  bool baseMissing = false;
  auto found = search(service, c, c.userBase, buildFilter(c.userFilter, user, ""),
                      {"uidNumber", "gidNumber", "memberOf"}, 2, &baseMissing);
  if (!found.ok()) return found.status();
  if (baseMissing)
    return Status::Unavailable("ldap: the user base '" + c.userBase + "' is not there");
  LDAPMessage* first = ldap_first_entry(service, found->get());
  if (!first) return Status::NotFound("no entry");
  if (ldap_next_entry(service, first)) return Status::Unauthenticated("several entries match");
  out.dn = entryDn(service, first);
  out.uid = number(service, first, "uidNumber");
  out.gid = number(service, first, "gidNumber");
  if (c.groupBase.empty()) out.groups = values(service, first, "memberOf");
  return out;
}

Status readGroups(LDAP* service, const LdapConfig& c, DirectoryUser& user) {
  if (c.groupBase.empty()) return Status::Ok();  // memberOf, read with the entry
  const char* nameAttr = c.groupNameAttribute.c_str();
  auto groups = search(service, c, c.groupBase, buildFilter(c.groupFilter, user.name, user.dn),
                       {nameAttr}, 0);
  if (!groups.ok()) return groups.status();
  for (LDAPMessage* e = ldap_first_entry(service, groups->get()); e;
       e = ldap_next_entry(service, e)) {
    user.groups.push_back(entryDn(service, e));
    for (auto& v : values(service, e, nameAttr)) user.groups.push_back(std::move(v));
  }
  return Status::Ok();
}

}  // namespace

Result<DirectoryUser> LdapDirectory::login(const std::string& user,
                                           const std::string& password) const {
  // An empty password makes a simple bind "unauthenticated", which servers accept: refuse it.
  if (password.empty() || user.empty()) return kInvalidLogin;
  auto service = serviceConnection(config_);
  if (!service.ok()) return service.status();
  auto out = findUser(service->get(), config_, user);
  if (!out.ok()) {
    const Code code = out.status().code();
    return code == Code::kNotFound || code == Code::kUnauthenticated ? kInvalidLogin : out.status();
  }
  {
    auto asUser = connect(config_);
    if (!asUser.ok()) return asUser.status();
    int rc = simpleBind(asUser->get(), out->dn, password);
    if (rc == LDAP_INVALID_CREDENTIALS) return kInvalidLogin;
    if (rc != LDAP_SUCCESS)
      return Status::Unavailable(std::string("ldap: bind as the user failed: ") +
                                 ldap_err2string(rc));
  }
  ALLOT_RETURN_IF_ERROR(readGroups(service->get(), config_, *out));
  return out;
}

Result<DirectoryUser> LdapDirectory::lookup(const std::string& user) const {
  if (user.empty()) return kInvalidLogin;
  auto service = serviceConnection(config_);
  if (!service.ok()) return service.status();
  auto out = findUser(service->get(), config_, user);
  if (!out.ok()) return out.status();
  ALLOT_RETURN_IF_ERROR(readGroups(service->get(), config_, *out));
  return out;
}

Result<bool> LdapDirectory::hasUser(const std::string& user) const {
  if (user.empty()) return false;
  auto service = serviceConnection(config_);
  if (!service.ok()) return service.status();
  auto found = findUser(service->get(), config_, user);
  if (found.ok()) return true;
  switch (found.status().code()) {
    case Code::kNotFound:
      return false;
    case Code::kUnauthenticated:
      return true;  // several entries: the name is taken in the directory all the same
    default:
      return found.status();
  }
}

}  // namespace allot::auth
