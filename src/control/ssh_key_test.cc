#include "control/ssh_key.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace allot::control {
namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Keys made by the real ssh-keygen in a temp dir of the test's own, so the fingerprints are
// checked against OpenSSH's, not against our own idea of them.
class SshKeyGenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (run("command -v ssh-keygen").empty()) GTEST_SKIP() << "ssh-keygen is not installed";
    char tmpl[] = "/tmp/allot-sshkey-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // Generates a key; returns the path of its private half (the public one is path + ".pub").
  std::string keygen(const std::string& name, const std::string& args) {
    std::string path = dir_ + "/" + name;
    run("ssh-keygen -q -N '' -C 'user@" + name + "' " + args + " -f " + path + " 2>&1");
    return path;
  }
  // The fingerprint as `ssh-keygen -lf` prints it: "256 SHA256:... comment (ED25519)".
  static std::string keygenFingerprint(const std::string& pub) {
    std::istringstream in(run("ssh-keygen -lf " + pub));
    std::string bits, fp;
    in >> bits >> fp;
    return fp;
  }
  std::string dir_;
};

TEST_F(SshKeyGenTest, FingerprintsMatchSshKeygenForEveryType) {
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {"ed25519", "-t ed25519"},       {"rsa2048", "-t rsa -b 2048"},
      {"rsa3072", "-t rsa -b 3072"},   {"ecdsa256", "-t ecdsa -b 256"},
      {"ecdsa384", "-t ecdsa -b 384"}, {"ecdsa521", "-t ecdsa -b 521"}};
  for (const auto& [name, args] : kinds) {
    const std::string pub = keygen(name, args) + ".pub";
    const std::string line = slurp(pub);  // with its trailing newline, as a file has it
    ASSERT_FALSE(line.empty()) << name;
    auto key = parseSshPublicKey(line);
    ASSERT_TRUE(key.ok()) << name << ": " << key.status().message();
    const std::string expected = keygenFingerprint(pub);
    ASSERT_EQ(expected.rfind("SHA256:", 0), 0u) << name << ": " << expected;
    EXPECT_EQ(key->fingerprint, expected) << name;
    EXPECT_EQ(key->comment, "user@" + name);
    // What goes into authorized_keys is the file's line itself.
    EXPECT_EQ(model::authorizedKeysLine(*key) + "\n", line) << name;
  }
}

TEST_F(SshKeyGenTest, RefusesThePrivateHalfSayingSo) {
  const std::string priv = keygen("ed", "-t ed25519");
  auto key = parseSshPublicKey(slurp(priv));
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(key.status().field(), "key");
  EXPECT_NE(key.status().message().find("PRIVATE key"), std::string::npos)
      << key.status().message();
  // Even one line of it.
  EXPECT_FALSE(parseSshPublicKey("-----BEGIN OPENSSH PRIVATE KEY-----").ok());
}

TEST_F(SshKeyGenTest, RefusesRsaKeysUnder2048Bits) {
  const std::string pub = keygen("rsa1024", "-t rsa -b 1024") + ".pub";
  auto key = parseSshPublicKey(slurp(pub));
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("1024 bits"), std::string::npos) << key.status().message();
}

TEST_F(SshKeyGenTest, RefusesOptionsBeforeTheType) {
  const std::string line = slurp(keygen("ed", "-t ed25519") + ".pub");
  auto key = parseSshPublicKey("command=\"/bin/sh\" " + line);
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("options"), std::string::npos) << key.status().message();
  auto two = parseSshPublicKey(line + line);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("several lines"), std::string::npos);
}

TEST_F(SshKeyGenTest, RefusesABlobOfAnotherTypeThanItsLabel) {
  std::string line = slurp(keygen("ed", "-t ed25519") + ".pub");
  line.replace(0, std::string("ssh-ed25519").size(), "ssh-rsa");
  auto key = parseSshPublicKey(line);
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("does not hold"), std::string::npos)
      << key.status().message();
}

TEST(SshKey, RefusesGarbageNamingTheKeyField) {
  for (const std::string line :
       {"", "   \n", "hello world", "ssh-dss AAAAB3NzaC1kc3MAAACBAP", "ssh-ed25519",
        "ssh-ed25519 not*base64", "ssh-ed25519 AAAA",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA==", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5\x01 x"}) {
    auto key = parseSshPublicKey(line);
    ASSERT_FALSE(key.ok()) << "accepted: " << line;
    EXPECT_EQ(key.status().field(), "key") << line;
  }
  auto putty =
      parseSshPublicKey("---- BEGIN SSH2 PUBLIC KEY ----\nAAAAC3Nz\n---- END SSH2 PUBLIC KEY ----");
  ASSERT_FALSE(putty.ok());
  EXPECT_NE(putty.status().message().find("ssh-keygen -i"), std::string::npos);
  std::string huge = "ssh-ed25519 " + std::string(kMaxSshKeyBytes, 'A');
  auto key = parseSshPublicKey(huge);
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("KiB"), std::string::npos);
}

TEST(SshKey, KnownKeyHasItsKnownFingerprint) {
  // An ed25519 key and the fingerprint `ssh-keygen -lf` printed for it; extra blanks are fine.
  auto key = parseSshPublicKey(
      "  ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF9kklV9X7y0UoHzbilQEwY/y2KxZ9xtoVYuz7pnfH9M  my "
      "laptop \r\n");
  ASSERT_TRUE(key.ok()) << key.status().message();
  EXPECT_EQ(key->type, "ssh-ed25519");
  EXPECT_EQ(key->comment, "my laptop");
  EXPECT_EQ(key->fingerprint, "SHA256:NMrIqlWPlRXo06L5yx4MVnK8IJbiTowYwQOmwKIgZQ0");
}

TEST(SshKey, FingerprintsAreTakenWithOrWithoutTheirPrefix) {
  EXPECT_EQ(normalizeSshFingerprint("SHA256:abc"), "SHA256:abc");
  EXPECT_EQ(normalizeSshFingerprint("abc"), "SHA256:abc");
}

}  // namespace
}  // namespace allot::control
