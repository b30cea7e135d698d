#include "exe/login_config.h"

#include <gtest/gtest.h>

#include <string>

namespace allot {
namespace {

Status readLdapUrl(const std::string& url, const std::string& more = "") {
  auth::LoginConfig out;
  auto tbl = toml::parse("[ldap]\nurl = \"" + url +
                         "\"\nbind_dn = \"cn=allot,dc=example,dc=org\"\n"
                         "bind_password = \"service-secret\"\n"
                         "user_base = \"ou=people,dc=example,dc=org\"\n" +
                         more);
  return readLoginConfig(tbl, out);
}

// A directory to another machine over plain ldap:// would carry every login's password, and the
// service account's, in the clear: allotd refuses to start with one, unless it is told that is
// acceptable. TLS (ldaps:// or StartTLS) and the machine itself are fine.
TEST(LoginConfig, PlainLdapToAnotherMachineTakesStartTlsOrSayingSo) {
  for (const char* url : {"ldap://ldap.example.org", "ldap://10.0.0.5:389", "ldap://[fd00::5]/",
                          "ldap://127-0-0-1.example.org", "ldap://127.example.org"}) {
    Status st = readLdapUrl(url);
    EXPECT_FALSE(st.ok()) << url;
    EXPECT_EQ(st.message().rfind("ldap.url: ", 0), 0u) << st.message();
    EXPECT_NE(st.message().find("start_tls"), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find("service-secret"), std::string::npos);
    EXPECT_TRUE(readLdapUrl(url, "start_tls = true\n").ok()) << url;
    EXPECT_TRUE(readLdapUrl(url, "allow_plaintext = true\n").ok()) << url;
  }
  for (const char* url : {"ldaps://ldap.example.org", "ldap://127.0.0.1:3890", "ldap://localhost",
                          "ldap://[::1]:389"})
    EXPECT_TRUE(readLdapUrl(url).ok()) << url;
  // libldap would try the urls of a list in turn: the loopback first, then the other in the
  // clear. One url only.
  for (const char* url :
       {"ldap://127.0.0.1:389,ldap://dc.example.org", "ldap://127.0.0.1 ldap://dc.example.org"})
    EXPECT_FALSE(readLdapUrl(url, "start_tls = true\n").ok()) << url;
}

}  // namespace
}  // namespace allot
