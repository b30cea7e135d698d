// Users' SSH public keys: registered through the API, later written by the agent into a
// session's authorized_keys (docs/access.md, "SSH keys"). Kept in the user's store document, so a
// change is one PutUser in the change's batch.

#include <algorithm>
#include <set>

#include "control/access/access_service.h"
#include "control/names.h"
#include "control/ssh_key.h"

namespace allot::control {
namespace {

// Enough for every machine a person works from; a bound so a user cannot bloat their document.
constexpr size_t kMaxSshKeysPerUser = 32;
// A user's keys, as the authorized_keys lines they become, go in the desired state of every host
// where the user has a session, once a session. 32 keys of 16 KiB each let a few hundred such
// sessions pass the 64 MiB one message to an agent may carry, which would hold every job of the
// host; 64 KiB is a hundred ordinary keys (an RSA-4096 line is about 750 bytes).
constexpr size_t kMaxSshKeyBytesPerUser = 64 * 1024;

// The user whose keys `p` may manage: their own, or anyone's for a platform admin. Everyone else's
// are NotFound with the text an unknown user gets, so names do not leak.
Result<const model::User*> keyOwner(const World& w, const Principal& p, const std::string& user) {
  if (!p.isUser()) return Status::PermissionDenied("hosts have no SSH keys");
  const std::string name = user.empty() ? p.name : user;
  auto it = w.users.find(name);
  if (it == w.users.end() || (name != p.name && !p.isAdmin()))
    return Status::NotFound("no user '" + name + "'");
  return &it->second;
}

}  // namespace

Result<Change<model::SshKey>> AccessService::addSshKey(const Principal& p, const std::string& user,
                                                       std::string_view line) {
  auto owner = keyOwner(world_, p, user);
  if (!owner.ok()) return owner.status();
  auto key = parseSshPublicKey(line);
  if (!key.ok()) return key.status();
  model::User u = **owner;
  for (const auto& k : u.sshKeys) {
    if (k.fingerprint == key->fingerprint)
      return Status::AlreadyExists("user '" + u.name + "' already has the SSH key " +
                                   k.fingerprint);
  }
  if (u.sshKeys.size() >= kMaxSshKeysPerUser)
    return Status::FailedPrecondition("user '" + u.name + "' already has " +
                                      std::to_string(kMaxSshKeysPerUser) +
                                      " SSH keys; remove some first");
  size_t bytes = model::authorizedKeysLine(*key).size();
  for (const auto& k : u.sshKeys) bytes += model::authorizedKeysLine(k).size();
  if (bytes > kMaxSshKeyBytesPerUser)
    return Status::FailedPrecondition(
        "user '" + u.name + "': with this key, the SSH keys would take " + std::to_string(bytes) +
        " bytes, over " + std::to_string(kMaxSshKeyBytesPerUser / 1024) +
        " KiB; remove some, or shorten their comments");
  key->addedAt = clock_.nowMs();
  u.sshKeys.push_back(*key);
  Change<model::SshKey> c;
  c.value = *key;
  world_.users[u.name] = u;
  c.batch.add(store::PutUser{u});
  c.pushHosts = world_.sessionHostsOf(u.name);  // the new list goes into the next login
  return c;
}

Result<Change<model::SshKey>> AccessService::removeSshKey(const Principal& p,
                                                          const std::string& user,
                                                          const std::string& fingerprint) {
  auto owner = keyOwner(world_, p, user);
  if (!owner.ok()) return owner.status();
  model::User u = **owner;
  const std::string fp = normalizeSshFingerprint(fingerprint);
  auto it = std::find_if(u.sshKeys.begin(), u.sshKeys.end(),
                         [&](const model::SshKey& k) { return k.fingerprint == fp; });
  if (it == u.sshKeys.end()) return Status::NotFound("user '" + u.name + "' has no SSH key " + fp);
  Change<model::SshKey> c;
  c.value = *it;
  u.sshKeys.erase(it);
  world_.users[u.name] = u;
  c.batch.add(store::PutUser{u});
  c.pushHosts = world_.sessionHostsOf(u.name);  // the new list goes into the next login
  return c;
}

Result<std::vector<model::SshKey>> AccessService::listSshKeys(const Principal& p,
                                                              const std::string& user) const {
  auto owner = keyOwner(world_, p, user);
  if (!owner.ok()) return owner.status();
  return (*owner)->sshKeys;
}

}  // namespace allot::control
