#pragma once
// AccessService: who may call, as whom (docs/access.md). Accounts and their teams and roles, API
// and console tokens, logins after the API layer checked the password or the directory, SSH
// public keys, the Unix ids workloads run as, teams and projects, and the host credentials
// agents hold.
//
// Owns: the directory tables of the World (teams, users, tokens, projects, and the next Unix ids
// and secret ids); nothing else writes them. Reaches the sessions side through
// MembershipObserver (a user who leaves a team loses that team's session shares). Threading:
// allotd's I/O thread.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "control/access/access_types.h"
#include "control/change.h"
#include "control/cluster_options.h"
#include "control/principal.h"
#include "control/world.h"
#include "model/model.h"

namespace allot::control {

// Told when a user leaves teams (a membership removed, a directory login that lost a group), so
// that what the user held through those teams ends in the same batch.
class MembershipObserver {
 public:
  virtual ~MembershipObserver() = default;
  virtual void leftTeams(const model::User& u, store::WriteBatch& batch) = 0;
};

class AccessService {
 public:
  AccessService(const Clock& clock, World& world, UnixIdOptions unixIds,
                MembershipObserver& membership, bool teamAdminsCreateUsers = false)
      : clock_(clock),
        world_(world),
        unixIds_(unixIds),
        membership_(membership),
        teamAdminsCreateUsers_(teamAdminsCreateUsers) {}

  // On first start: the platform admin "admin" and its token (returned once); nullopt if users
  // already exist.
  std::optional<Change<std::string>> bootstrapAdmin();

  std::optional<Principal> authenticate(std::string_view bearer) const;

  // Unix identities (unix_ids.cc, docs/access.md). At start, after load: gives a uid
  // (and gid) to every user and a gid to every team stored without one; nullopt when none lacks
  // one. New users and teams get theirs as they are created. Ids are never reused: the next of
  // each range is kept in the store (meta next_uid, next_gid).
  std::optional<Change<int>> assignMissingUnixIds();
  // For directory logins: a uid/gid from LDAP is refused (InvalidArgument) when it lies in one
  // of Allot's ranges or another user already holds it.
  Status checkDirectoryIds(const std::string& user, int64_t uid, int64_t gid) const;
  // The identity `job`'s workload runs as; nullopt when its submitter has none (the agent then
  // refuses the job rather than run it as root).
  std::optional<model::RunAs> runAsOf(const model::Job& job) const;
  // The accounts a host profile creates on a host going to `team` ("" = the shared pool): the
  // team's enabled members (every enabled user, for the pool) and platform admins, with ids.
  std::vector<model::UnixAccount> accountsFor(const std::string& team) const;

  // Teams and projects (teams.cc): platform admins create teams; team-admins their projects.
  Result<Change<model::Team>> createTeam(const Principal& p, const std::string& name);
  std::vector<model::Team> listTeams(const Principal& p) const;
  // The images `team`'s work may run in (control/images/image_policy.h): platform admins set
  // them; whoever may see the team reads them.
  Result<Change<model::Team>> setImageAllow(const Principal& p, const std::string& team,
                                            std::vector<std::string> allow);
  // What the team's jobs and sessions that name no image run in; "" = on the host. Its
  // team-admins and platform admins set it, within the team's allow-list.
  Result<Change<model::Team>> setDefaultImage(const Principal& p, const std::string& team,
                                              const std::string& image);
  Result<model::Team> team(const Principal& p, const std::string& name) const;

  // Accounts, team membership and API tokens (accounts.cc, docs/access.md). Platform
  // admins create humans; team-admins may also create service accounts of their own teams.
  Result<Change<CreatedUser>> createUser(const Principal& p, NewUser u);
  // What createUser checks before it changes anything: whether `p` may create `u`, and `u`
  // itself (for a route that has more to check, slowly, in between).
  Status checkNewUser(const Principal& p, const NewUser& u) const;
  // One team and role, or a platform admin (role kPlatformAdmin, team optional): for tests and
  // tools that make simple accounts.
  Result<Change<CreatedUser>> createUser(const Principal& p, const std::string& name,
                                         const std::string& team, model::Role role);
  // The users `p` may see, as `p` may see them: only the teams `p` shares with them.
  std::vector<model::User> listUsers(const Principal& p) const;
  Result<model::User> getUser(const Principal& p, const std::string& name) const;
  Result<Change<model::User>> updateUser(const Principal& p, const std::string& name,
                                         const UserUpdate& update);
  // Adds `user` to `team` with `role`, changes their role, or (nullopt) removes them. Platform
  // admins and the team's team-admins; a team-admin cannot make anyone a platform admin.
  Result<Change<model::User>> setMembership(const Principal& p, const std::string& team,
                                            const std::string& user,
                                            std::optional<model::Role> role);
  // The team's members and their roles, for anyone who may see the team.
  Result<std::vector<std::pair<model::User, model::Role>>> teamMembers(
      const Principal& p, const std::string& team) const;
  // Whether the host credential with public id `tokenId` still belongs to `host`: a reset or a
  // re-join deletes it. A map lookup, for every message of an open agent stream.
  bool hostCredentialLive(const std::string& tokenId, const std::string& host) const;
  // API tokens: one's own, or a service account's for those who manage it; others' are NotFound.
  Result<Change<CreatedToken>> createToken(const Principal& p, const NewToken& t);
  Result<std::vector<model::ApiToken>> listTokens(const Principal& p,
                                                  const std::string& user) const;
  Result<Change<model::ApiToken>> revokeToken(const Principal& p, const std::string& id);
  // SSH public keys (ssh_keys.cc): `user` "" means the caller. People manage their own;
  // platform admins anyone's; anyone else's keys are NotFound, as if the user did not exist.
  // `line` is one line of a .pub file (control/ssh_key.h says what is accepted).
  Result<Change<model::SshKey>> addSshKey(const Principal& p, const std::string& user,
                                          std::string_view line);
  // `fingerprint` with or without its "SHA256:" prefix.
  Result<Change<model::SshKey>> removeSshKey(const Principal& p, const std::string& user,
                                             const std::string& fingerprint);
  Result<std::vector<model::SshKey>> listSshKeys(const Principal& p, const std::string& user) const;
  // Logins (logins.cc), after the API layer checked the password off the I/O thread.
  // A token for `user` of `kind` (kApi named "login", or kSession named "console"), valid for
  // `ttlMs` (0 = no expiry); the user's expired tokens go at the same time.
  Result<Change<CreatedToken>> issueLoginToken(const std::string& user, model::TokenKind kind,
                                               int64_t ttlMs);
  // Creates or updates the directory user (source ldap) with the teams its groups grant now;
  // teams Allot lacks are skipped. Refuses a local account of the same name and a user left with
  // no team.
  Result<Change<model::User>> syncDirectoryUser(const DirectoryLogin& login);
  // The directory users holding a token that has not expired: whose access a recheck reads again
  // (api/directory_recheck.h), so that a group taken away ends what it granted without
  // waiting for a login.
  std::vector<std::string> directoryUsersWithTokens() const;
  // The directory grants `name` nothing any more (its entry is gone, or it is in no group that
  // grants a team Allot has): its teams and platform admin go, and every token it holds ends, as
  // a login the directory refuses would leave it. NotFound for anyone but a directory user.
  Result<Change<model::User>> withdrawDirectoryUser(const std::string& name);
  // Deletes a token (a session that logged out or went idle), whoever owns it.
  Result<Change<model::ApiToken>> endSession(const std::string& tokenId);
  Result<Change<model::Project>> createProject(const Principal& p, const std::string& name,
                                               const std::string& team);
  std::vector<model::Project> listProjects(const Principal& p) const;

  // Host credentials, for the hosts service's joins and resets. Gives `tok` (owner, name, kind
  // and times set) an id of `idKind` and a fresh secret, keeps its hash in memory and in `batch`,
  // and returns it with the secret, which exists nowhere else.
  CreatedToken mintToken(model::ApiToken tok, const char* idKind, store::WriteBatch& batch);
  // Deletes every credential of the host, in `batch` and in memory.
  void revokeHostCredentials(const std::string& host, store::WriteBatch& batch);

 private:
  // `u` as `p` may see it (listUsers, getUser).
  model::User seenBy(const Principal& p, const model::User& u) const;
  // Revokes the tokens of `u` that someone else was given: a person's "initial" token when a
  // team-admin created the account (the reply went to them), every token of a service account
  // (its team-admins mint them).
  // Called when the account gains rights (a team, platform admin) or a person sets a password:
  // a token must never come to hold more than its giver could grant.
  void revokeTokensGivenByOthers(const model::User& u, store::WriteBatch& batch);
  // Give `u` / `t` ids from the ranges when they have none, recording the next free ids.
  Status assignUnixIds(model::User& u, store::WriteBatch& batch);
  Status assignTeamGid(model::Team& t, store::WriteBatch& batch);

  const Clock& clock_;
  World& world_;
  UnixIdOptions unixIds_;
  MembershipObserver& membership_;
  const bool teamAdminsCreateUsers_;  // ClusterOptions::teamAdminsCreateUsers
};

}  // namespace allot::control
