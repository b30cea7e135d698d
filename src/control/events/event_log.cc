#include "control/events/event_log.h"

#include <algorithm>

#include "control/authz.h"

namespace allot::control {

void EventLog::load(const std::vector<model::Event>& stored) {
  events_.assign(stored.begin(), stored.end());
  if (!events_.empty()) nextId_ = std::max(nextId_, events_.back().id + 1);
}

model::Event& EventLog::append(model::Event e, store::WriteBatch& batch) {
  e.id = nextId_++;
  e.at = clock_.nowMs();
  batch.add(store::AppendEvent{e});
  if (events_.size() >= store::kEventsLoaded) events_.pop_front();
  events_.push_back(std::move(e));
  return events_.back();
}

model::Event& EventLog::appendForJob(model::EventKind kind, const model::Job& j,
                                     std::string message, const nlohmann::json& details,
                                     store::WriteBatch& batch) {
  model::Event e;
  e.kind = kind;
  e.team = j.team;
  e.project = j.project;
  e.user = j.user;
  e.jobId = j.id;
  e.hosts = model::rankHosts(j);
  e.message = std::move(message);
  e.details = details.dump();
  return append(std::move(e), batch);
}

Result<std::vector<model::Event>> EventLog::list(const Principal& p, const EventFilter& f) const {
  if (!f.team.empty() && (!teams_.count(f.team) || !authz::canSeeTeam(p, f.team)))
    return Status::NotFound("no team '" + f.team + "'");
  std::vector<model::Event> out;
  for (auto it = events_.rbegin(); it != events_.rend() && out.size() < f.limit; ++it) {
    const model::Event& e = *it;
    if (e.at < f.since) break;  // appended in time order
    if (!f.team.empty() && e.team != f.team) continue;
    if (f.jobId != 0 && e.jobId != f.jobId) continue;
    if (f.kind && e.kind != *f.kind) continue;
    if (!authz::canSeeTeam(p, e.team)) continue;
    out.push_back(e);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace allot::control
