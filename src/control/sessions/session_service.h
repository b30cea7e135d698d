#pragma once
// SessionService: interactive sessions (docs/sessions.md). A session is a job made from a
// profile, so the scheduler places it, the ledger accounts it and team isolation covers it like
// any job. What is its own: a name unique among its owner's live sessions, the app its agent
// starts, who may open it (its owner and those it is shared with, while in its team), the
// runtime state its agent reports (Jupyter's token, readiness, connections), and where each
// user's `local` storage lives.
//
// Owns: the sessions' runtime state (memory only: filled again by each agent's hello after a
// restart of allotd), the proxy's activity marks, and users' local homes. Reaches the jobs side
// through SessionJobs; looks profiles up in the ProfileService. Implements MembershipObserver:
// a user who leaves a team is taken off that team's session shares. Threading: allotd's I/O
// thread.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "control/access/access_service.h"
#include "control/change.h"
#include "control/job_request.h"
#include "control/principal.h"
#include "control/sessions/profile_service.h"
#include "control/sessions/session_types.h"
#include "control/world.h"
#include "model/model.h"

namespace allot::control {

// What sessions need of the jobs side: a session is submitted, cancelled and changed as a job.
class SessionJobs {
 public:
  virtual ~SessionJobs() = default;
  virtual Result<Change<model::Job>> submitJob(const Principal& p, JobRequest request) = 0;
  virtual Result<Change<model::Job>> cancelJob(const Principal& p, int64_t id) = 0;
  // Why a queued job waits, from the last scheduling pass.
  virtual std::string waitReason(const model::Job& job) const = 0;
  // Records a change made to `job` (its old copy `before`) and keeps the indexes right.
  virtual void jobUpdated(model::Job& job, const model::Job& before, store::WriteBatch& batch) = 0;
};

class SessionService : public MembershipObserver {
 public:
  SessionService(const Clock& clock, World& world, const ProfileService& profiles,
                 SessionJobs& jobs, std::string sharedDir)
      : clock_(clock),
        world_(world),
        profiles_(profiles),
        jobs_(jobs),
        sharedDir_(std::move(sharedDir)) {}

  // Only its owner and the users it is shared with may open a session (open), and another user
  // is told it does not exist; otherwise it is visible like any job of its team.
  Result<Change<model::Job>> create(const Principal& p, SessionRequest request);
  // The caller's own sessions, newest first; with `all`, every session they may see.
  std::vector<model::Job> list(const Principal& p, bool all, bool live) const;
  Result<model::Job> get(const Principal& p, int64_t id) const;
  // The owner (or a team-admin, or a platform admin) stops it; it ends as cancelled.
  Result<Change<model::Job>> stop(const Principal& p, int64_t id);
  // Shares a session with `users` (replacing the list); the owner only.
  Result<Change<model::Job>> share(const Principal& p, int64_t id, std::vector<std::string> users);

  // allotd's own view of a session's use: the proxy calls these for each request it forwards and
  // for each WebSocket it relays (open while `open`), which count as activity at once, before the
  // agent's next look at Jupyter.
  void proxied(int64_t id);
  void relay(int64_t id, bool open);
  // What its agent last said about a running session; nullopt when nothing yet.
  std::optional<model::ActualSession> runtime(int64_t id) const;
  // The WebSockets and SSH connections allotd relays to the session now.
  int relays(int64_t id) const {
    auto it = relays_.find(id);
    return it == relays_.end() ? 0 : it->second;
  }
  // When the proxy last forwarded a request to it; 0 when never.
  TimeMs proxiedAt(int64_t id) const {
    auto it = proxiedAt_.find(id);
    return it == proxiedAt_.end() ? 0 : it->second;
  }
  // Where to reach a session for its owner (or a user it is shared with), either still in the
  // session's team: its host and, for Jupyter, the token to supply. NotFound for anyone else;
  // Unavailable while it starts. The proxy asks at every request.
  Result<SessionEndpoint> open(const Principal& p, int64_t id) const;
  // The same for an SSH connection: the owner's only (anyone else is told it does not exist),
  // and only where the session's host offers SSH.
  Result<SessionEndpoint> openSsh(const Principal& p, int64_t id) const;

  // From the jobs and agents sides: a running session's report from its agent; a job that
  // started (its `local` storage now lives on its host) or ended (its runtime state goes).
  void reported(const model::Job& j, const model::ActualSession& s) { runtime_[j.id] = s; }
  void started(const model::Job& j) {
    if (j.session && j.session->storage == "local" && !firstRank(j).host.empty() && j.startedAt > 0)
      localHomes_[j.user].insert(firstRank(j).host);
  }
  void ended(int64_t id) {
    runtime_.erase(id);
    proxiedAt_.erase(id);
  }
  // The hosts holding `user`'s `local` storage (they ran a local session there): the scheduler
  // places their next local session on one of them when it can. Null when none.
  const std::set<std::string>* localHomesOf(const std::string& user) const {
    auto it = localHomes_.find(user);
    return it == localHomes_.end() ? nullptr : &it->second;
  }

 private:
  void leftTeams(const model::User& u, store::WriteBatch& batch) override;

  const Clock& clock_;
  World& world_;
  const ProfileService& profiles_;
  SessionJobs& jobs_;
  std::string sharedDir_;  // sessions' `shared` storage; "" = none (allotd --session-shared-dir)
  std::map<int64_t, model::ActualSession> runtime_;
  std::map<int64_t, TimeMs> proxiedAt_;
  std::map<int64_t, int> relays_;
  std::map<std::string, std::set<std::string>> localHomes_;
};

}  // namespace allot::control
