// Who may add, list and remove SSH keys, and that they are kept.

#include <sodium.h>

#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

// Real ed25519 keys (ssh-keygen); the first's fingerprint as `ssh-keygen -lf` prints it.
constexpr const char* kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF9kklV9X7y0UoHzbilQEwY/y2KxZ9xtoVYuz7pnfH9M my laptop\n";
constexpr const char* kKeyFingerprint = "SHA256:NMrIqlWPlRXo06L5yx4MVnK8IJbiTowYwQOmwKIgZQ0";
constexpr const char* kOtherKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF5/qtqQwGrl+JN0vcMJ4OpWKz+amTPDbg3MOO2I1a89 bob@desk";

// A well-formed ed25519 public key line whose 32 key bytes are all `seed`.
std::string syntheticKey(unsigned char seed) {
  std::string blob = std::string("\0\0\0\x0bssh-ed25519\0\0\0\x20", 19) + std::string(32, seed);
  std::string b64(sodium_base64_ENCODED_LEN(blob.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(b64.data(), b64.size(), reinterpret_cast<const unsigned char*>(blob.data()),
                    blob.size(), sodium_base64_VARIANT_ORIGINAL);
  return "ssh-ed25519 " + std::string(b64.c_str());
}

using SshKeyClusterTest = ClusterTest;

TEST_F(SshKeyClusterTest, AUserHoldsAtMost32Keys) {
  for (unsigned char i = 0; i < 32; ++i) {
    auto added = cluster_->access().addSshKey(alice_, "", syntheticKey(i));
    ASSERT_TRUE(added.ok()) << int(i) << ": " << added.status().toString();
  }
  EXPECT_EQ(cluster_->access().addSshKey(alice_, "", syntheticKey(32)).status().code(),
            Code::kFailedPrecondition);
  EXPECT_EQ(cluster_->access().listSshKeys(alice_, "")->size(), 32u);
}

// Attack, any user: keys as long as a key may be (16 KiB, mostly comment), as many as allowed.
// They go into the desired state of every host where the user has a session, once a session, so
// a few hundred sessions of such users passed what one message to an agent may carry, holding
// every job of the host. A user's keys together may take 64 KiB.
TEST_F(SshKeyClusterTest, AUsersKeysTogetherTakeAtMost64KiB) {
  const std::string comment(15'000, 'c');
  for (unsigned char i = 0; i < 4; ++i) {
    auto added = cluster_->access().addSshKey(alice_, "", syntheticKey(i) + " " + comment);
    ASSERT_TRUE(added.ok()) << int(i) << ": " << added.status().toString();
  }
  auto over = cluster_->access().addSshKey(alice_, "", syntheticKey(4) + " " + comment);
  EXPECT_EQ(over.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(over.status().message().find("over 64 KiB"), std::string::npos)
      << over.status().message();
  EXPECT_TRUE(cluster_->access().addSshKey(alice_, "", syntheticKey(5)).ok())
      << "an ordinary key still fits";
  EXPECT_EQ(cluster_->access().listSshKeys(alice_, "")->size(), 5u);
}

TEST_F(SshKeyClusterTest, UsersManageTheirOwnKeys) {
  clock_.advance(5000);
  auto added = cluster_->access().addSshKey(alice_, "", kKey);
  ASSERT_TRUE(added.ok()) << added.status().toString();
  EXPECT_EQ(added->value.fingerprint, kKeyFingerprint);
  EXPECT_EQ(added->value.addedAt, clock_.nowMs());
  // The change stores the user, keys and all.
  const auto* put = findOp<store::PutUser>(*added);
  ASSERT_NE(put, nullptr);
  ASSERT_EQ(put->user.sshKeys.size(), 1u);

  auto keys = cluster_->access().listSshKeys(alice_, "");
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].comment, "my laptop");

  EXPECT_EQ(cluster_->access().addSshKey(alice_, "alice", kKey).status().code(),
            Code::kAlreadyExists);
  // bob may hold the same key; it is his own entry.
  EXPECT_TRUE(cluster_->access().addSshKey(bob_, "", kKey).ok());

  // Removal takes the fingerprint with or without its prefix.
  std::string bare = std::string(kKeyFingerprint).substr(7);
  auto removed = cluster_->access().removeSshKey(alice_, "", bare);
  ASSERT_TRUE(removed.ok()) << removed.status().toString();
  EXPECT_EQ(removed->value.fingerprint, kKeyFingerprint);
  EXPECT_TRUE(cluster_->access().listSshKeys(alice_, "")->empty());
  EXPECT_EQ(cluster_->access().removeSshKey(alice_, "", kKeyFingerprint).status().code(),
            Code::kNotFound);
}

TEST_F(SshKeyClusterTest, AnotherUsersKeysDoNotExistExceptForPlatformAdmins) {
  ASSERT_TRUE(cluster_->access().addSshKey(alice_, "", kKey).ok());
  const Status unknown = cluster_->access().listSshKeys(bob_, "nosuchuser").status();
  const Status others = cluster_->access().listSshKeys(bob_, "alice").status();
  EXPECT_EQ(others.code(), Code::kNotFound);
  EXPECT_EQ(unknown.code(), Code::kNotFound);
  EXPECT_EQ(cluster_->access().addSshKey(bob_, "alice", kOtherKey).status().code(),
            Code::kNotFound);
  EXPECT_EQ(cluster_->access().removeSshKey(bob_, "alice", kKeyFingerprint).status().code(),
            Code::kNotFound);
  EXPECT_EQ(cluster_->access().listSshKeys(alice_, "")->size(), 1u);

  // A platform admin manages anyone's.
  ASSERT_TRUE(cluster_->access().addSshKey(admin_, "alice", kOtherKey).ok());
  EXPECT_EQ(cluster_->access().listSshKeys(admin_, "alice")->size(), 2u);
  EXPECT_TRUE(cluster_->access().removeSshKey(admin_, "alice", kKeyFingerprint).ok());
  EXPECT_EQ(cluster_->access().listSshKeys(alice_, "")->size(), 1u);
}

TEST_F(SshKeyClusterTest, BadKeysAreRefusedNamingTheField) {
  auto bad = cluster_->access().addSshKey(alice_, "", "ssh-ed25519 garbage!");
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.status().field(), "key");
  EXPECT_TRUE(cluster_->access().listSshKeys(alice_, "")->empty());
}

class SshKeyDurableTest : public DurableClusterTest {};

TEST_F(SshKeyDurableTest, KeysSurviveARestart) {
  start();
  bootstrap();
  keep(cluster_->access().addSshKey(admin_, "", kKey));
  start();
  auto keys = cluster_->access().listSshKeys(*cluster_->access().authenticate(adminToken_), "");
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].fingerprint, kKeyFingerprint);
  EXPECT_EQ(model::authorizedKeysLine((*keys)[0]) + "\n", kKey);
}

}  // namespace
}  // namespace allot::control
