// Unix identities: the uid and gids workloads run as on the hosts (docs/access.md, "Workloads
// run as their owner"). allotd hands them out from ranges of its own ([identity] in allotd.toml)
// and never twice: the next free id of each range is stored beside the users and teams, so a
// user created after another was removed (or disabled) never inherits its files on a host.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "control/access/access_service.h"
#include "control/names.h"
#include "model/agent_protocol.h"

namespace allot::control {
namespace {

bool inRange(int64_t id, int64_t lo, int64_t hi) { return id >= lo && id <= hi; }

// Whether any user's uid or gid, or any team's gid, is `id`: both ranges hand out ids that none
// of these holds, since a user's private group shares its user's number.
bool unixIdTaken(const World& w, int64_t id) {
  for (const auto& [name, user] : w.users) {
    if (user.uid == id || user.gid == id) return true;
  }
  for (const auto& [name, team] : w.teams) {
    if (team.gid == id) return true;
  }
  return false;
}

// The refusal when `kind`'s range ("uid" or "gid") [min, max] has no id left for `owner`.
Status rangeSpent(const std::string& kind, int64_t min, int64_t max, const std::string& owner) {
  return Status::FailedPrecondition("no " + kind + " left in [identity] " + kind + "_min.." + kind +
                                    "_max (" + std::to_string(min) + ".." + std::to_string(max) +
                                    ") for " + owner);
}

// The first id from `from` up to `max` that nobody holds; max + 1 when the range is spent.
int64_t firstFreeId(const World& w, int64_t from, int64_t max) {
  while (from <= max && unixIdTaken(w, from)) ++from;
  return from;
}

}  // namespace

Status AccessService::assignUnixIds(model::User& u, store::WriteBatch& batch) {
  if (u.uid >= 0) return Status::Ok();  // the directory's, or given before: kept
  const UnixIdOptions& o = unixIds_;
  // Skips ids a directory user holds (they are refused inside the range, but a store written
  // before that check, or a range moved since, may still have one).
  const int64_t next = firstFreeId(world_, std::max(world_.nextUid, o.uidMin), o.uidMax);
  if (next > o.uidMax) return rangeSpent("uid", o.uidMin, o.uidMax, "user '" + u.name + "'");
  u.uid = next;
  u.gid = next;  // a user-private group, as Debian and Red Hat make them
  world_.nextUid = next + 1;
  batch.add(store::PutMeta{"next_uid", std::to_string(world_.nextUid)});
  return Status::Ok();
}

Status AccessService::assignTeamGid(model::Team& t, store::WriteBatch& batch) {
  if (t.gid >= 0) return Status::Ok();
  const UnixIdOptions& o = unixIds_;
  const int64_t next = firstFreeId(world_, std::max(world_.nextGid, o.gidMin), o.gidMax);
  if (next > o.gidMax) return rangeSpent("gid", o.gidMin, o.gidMax, "team '" + t.name + "'");
  t.gid = next;
  world_.nextGid = next + 1;
  batch.add(store::PutMeta{"next_gid", std::to_string(world_.nextGid)});
  return Status::Ok();
}

std::optional<Change<int>> AccessService::assignMissingUnixIds() {
  Change<int> c;
  c.value = 0;
  for (auto& [name, t] : world_.teams) {
    if (t.gid >= 0) continue;
    if (Status st = assignTeamGid(t, c.batch); !st.ok()) {
      spdlog::error("team '{}' keeps no Unix group: {}", name, st.message());
      continue;
    }
    c.batch.add(store::PutTeam{t});
    ++c.value;
  }
  for (auto& [name, u] : world_.users) {
    if (u.uid >= 0) continue;
    if (Status st = assignUnixIds(u, c.batch); !st.ok()) {
      spdlog::error("user '{}' keeps no Unix identity; their jobs cannot start: {}", name,
                    st.message());
      continue;
    }
    c.batch.add(store::PutUser{u});
    ++c.value;
  }
  if (c.value == 0) return std::nullopt;
  return c;
}

Status AccessService::checkDirectoryIds(const std::string& user, int64_t uid, int64_t gid) const {
  const UnixIdOptions& o = unixIds_;
  if (uid == 0 || gid == 0)
    return Status::InvalidArgument("uid: user '" + user + "' has uid or gid 0 in the directory",
                                   "uid");
  if (uid < 0 || gid < 0 || uid > model::kMaxUnixId || gid > model::kMaxUnixId)
    return Status::InvalidArgument("uid: the directory gives user '" + user + "' uid " +
                                       std::to_string(uid) + " gid " + std::to_string(gid) +
                                       ", outside the ids a host can give (1.." +
                                       std::to_string(model::kMaxUnixId) + ")",
                                   "uid");
  for (int64_t id : {uid, gid}) {
    if (inRange(id, o.uidMin, o.uidMax) || inRange(id, o.gidMin, o.gidMax))
      return Status::InvalidArgument("uid: the directory gives user '" + user + "' id " +
                                         std::to_string(id) +
                                         ", inside the ranges allotd allocates from ([identity])",
                                     "uid");
  }
  for (const auto& [name, other] : world_.users) {
    if (name != user && other.uid == uid)
      return Status::InvalidArgument(
          "uid: uid " + std::to_string(uid) + " of user '" + user + "' is user '" + name + "'s",
          "uid");
  }
  return Status::Ok();
}

std::vector<model::UnixAccount> AccessService::accountsFor(const std::string& team) const {
  std::vector<model::UnixAccount> out;
  for (const auto& [name, u] : world_.users) {
    if (u.disabled || u.uid <= 0 || u.gid <= 0) continue;
    if (!team.empty() && !u.roleIn(team) && !u.platformAdmin) continue;
    model::UnixAccount a{u.name, u.uid, u.gid, {}};
    for (const auto& [t, role] : u.teams) {
      if (auto it = world_.teams.find(t); it != world_.teams.end() && it->second.gid > 0)
        a.teams[t] = it->second.gid;
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::optional<model::RunAs> AccessService::runAsOf(const model::Job& job) const {
  auto u = world_.users.find(job.user);
  if (u == world_.users.end() || u->second.uid <= 0 || u->second.gid <= 0) return std::nullopt;
  model::RunAs r;
  r.user = u->second.name;
  r.uid = u->second.uid;
  r.gid = u->second.gid;
  r.team = job.team;
  if (auto t = world_.teams.find(job.team); t != world_.teams.end() && t->second.gid > 0)
    r.teamGid = t->second.gid;
  return r;
}

}  // namespace allot::control
