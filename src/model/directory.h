#pragma once
// Teams, their users and roles, API tokens, projects and join tokens: who may call, as whom.
// Part of model.h: plain structs, no behaviour beyond small helpers.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace allot::model {

// Roles, weakest first, so they compare. A user holds one role in each of their teams: a viewer
// reads the team's work; a member also submits work and cancels their own; a team-admin also
// runs the team (members, projects, the quota split, leases, any of its work). Platform admin is
// not a team role but a flag of the user (User::platformAdmin): it may do everything.
enum class Role { kViewer, kMember, kTeamAdmin, kPlatformAdmin };
const char* roleName(Role r);
std::optional<Role> parseRole(const std::string& s);
// The roles a user may hold in a team: viewer, member, team-admin.
inline bool isTeamRole(Role r) { return r != Role::kPlatformAdmin; }

// What a team is promised and how it shares. GPU counts are per GPU model; the key "" means any
// model (shown as "any" in JSON). The quota policy (sched/quota) gives these their meaning.
struct Quota {
  std::map<std::string, int> guaranteed;
  int borrowLimit = -1;  // most GPUs it may use beyond its guarantee; -1 = no limit
  int lendLimit = -1;    // most of its idle guarantee others may use; -1 = all of it
  double weight = 1.0;   // its fair-share weight when borrowing; > 0
  // Contour -> the most GPUs its work may hold in that contour at once; absent = no limit.
  std::map<std::string, int> contourLimits;
};

// What to do about an allocation whose GPUs all stay under `thresholdPct` utilisation for
// `afterMs`: tell its owners (an event, the job's `idle` field, the webhook), and with kReclaim
// also take the GPUs back `graceMs` after telling them. Set per team or project; absent there,
// the team's or the platform's applies (see control/idle_policy.h).
enum class IdleAction { kNotify, kReclaim };
const char* idleActionName(IdleAction a);
std::optional<IdleAction> parseIdleAction(const std::string& s);

struct IdlePolicy {
  double thresholdPct = 5;        // 0..100
  int64_t afterMs = 30 * 60'000;  // > 0
  IdleAction action = IdleAction::kNotify;
  int64_t graceMs = 15 * 60'000;  // >= 0
  std::string webhook;            // http:// URL to POST events to; empty = none
  bool operator==(const IdlePolicy&) const = default;
};

// What a team's pulls present to one registry (docs/environments.md, "Registry credentials").
// The password is sealed with allotd's secret key (common/sealed_box.h): the API never returns it,
// logs and the audit log never hold it, and it leaves allotd only in the desired state of the
// team's own jobs in images from that registry, to the agent that pulls them.
struct RegistryLogin {
  std::string registry;  // HOST[:PORT], as references name it
  std::string username;
  std::string sealedPassword;
  std::string setBy;
  TimeMs setAt = 0;
};

struct Team {
  std::string name;
  TimeMs createdAt = 0;
  // The Unix group of the team's storage and workloads (allocated by allotd, or the directory's);
  // -1 = none yet.
  int64_t gid = -1;
  Quota quota;
  // The team lets others use its idle dedicated hosts and GPUs, and takes them back by
  // preemption when it needs them.
  bool lendDedicated = false;
  // Decayed GPU-seconds of use, as of usageAt: the fair-share history. Written by the scheduling
  // side; kept here so a restart does not forget who used a lot lately.
  double usageGpuSeconds = 0;
  TimeMs usageAt = 0;
  std::optional<IdlePolicy> idlePolicy;  // absent: the platform's default
  // The images its jobs may run in (docs/environments.md): prefixes of references
  // (REGISTRY[/REPOSITORY...]) that platform admins allow; empty: none.
  std::vector<std::string> imageAllow;
  // What its jobs and sessions that name no image run in; "" = on the host. Within imageAllow
  // when set (a team-admin sets it; docs/environments.md, "Default images").
  std::string defaultImage;
  std::vector<RegistryLogin> registryLogins;  // at most one per registry
};

// A person, or a service account that CI and automation use (it logs in only with tokens).
enum class UserKind { kHuman, kService };
const char* userKindName(UserKind k);
// Where the account lives: in allotd (password set here) or in the directory (LDAP/AD), whose
// groups then decide the user's teams and roles at each login.
enum class UserSource { kLocal, kLdap };
const char* userSourceName(UserSource s);

// An OpenSSH public key a user registered, to reach their sessions over SSH (docs/access.md).
// Only the public half: the private key never leaves the user's machine.
struct SshKey {
  std::string fingerprint;  // "SHA256:<base64, no padding>", as `ssh-keygen -l` prints it
  std::string type;         // "ssh-ed25519", "ssh-rsa", ...
  std::string blob;         // base64, as in the .pub file
  std::string comment;      // free text after the key; may be empty
  TimeMs addedAt = 0;
};
// The key as one line of an authorized_keys file: "type blob comment", never with options.
std::string authorizedKeysLine(const SshKey& k);

struct User {
  std::string name{};
  std::map<std::string, Role> teams{};  // team -> the user's role in it (a team role)
  bool platformAdmin = false;
  UserKind kind = UserKind::kHuman;
  UserSource source = UserSource::kLocal;
  // Argon2id string (libsodium's crypto_pwhash_str) for a local user's password; empty = none.
  std::string passwordHash{};
  // The Unix identity workloads run as: from LDAP's posixAccount, or allocated by allotd. -1 =
  // none yet.
  int64_t uid = -1;
  int64_t gid = -1;
  bool disabled = false;          // a disabled user cannot authenticate; their work stays on record
  std::vector<SshKey> sshKeys{};  // in the order added
  TimeMs createdAt = 0;
  std::string createdBy{};

  // The user's role in `team`, if a member.
  std::optional<Role> roleIn(const std::string& team) const {
    auto it = teams.find(team);
    return it == teams.end() ? std::nullopt : std::optional<Role>(it->second);
  }
};

// What a token is for: the API (CLI, scripts; named by its owner), a console login (a browser
// session behind a cookie), or an agent's host credential.
enum class TokenKind { kApi, kSession, kHost };
const char* tokenKindName(TokenKind k);

// An API credential. The secret is shown once; the store keeps only its hash.
struct ApiToken {
  std::string id{};     // public part, "tok-<n>"
  std::string owner{};  // user name, or "host:<name>" for a host credential
  std::string hash{};
  TimeMs createdAt = 0;
  TimeMs expiresAt = 0;  // 0 = never
  std::string name{};    // the owner's label for it ("laptop", "ci"); may be empty
  TokenKind kind = TokenKind::kApi;
};

struct Project {
  std::string name;
  std::string team;
  TimeMs createdAt = 0;
  // Its split of the team's guarantee, same keys as Quota::guaranteed. Over a team's projects the
  // split never exceeds the team's guarantee, key by key.
  std::map<std::string, int> guaranteed;
  std::optional<IdlePolicy> idlePolicy;  // absent: its team's
};

// An admin-made token that lets agents join: `uses` joins (1 by default) until it expires or is
// revoked. Each join counts one use in the same store commit as the join itself.
struct JoinToken {
  std::string id;
  std::string hash;
  std::string createdBy;
  TimeMs createdAt = 0;
  TimeMs expiresAt = 0;
  int uses = 1;          // joins allowed in all
  int used = 0;          // joins made with it
  TimeMs revokedAt = 0;  // 0: not revoked

  int usesLeft() const { return revokedAt != 0 || used >= uses ? 0 : uses - used; }
};

}  // namespace allot::model
