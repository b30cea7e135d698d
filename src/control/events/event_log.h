#pragma once
// EventLog: what happened to jobs, hosts, leases and the scheduler, as `allot events` and a job's
// page show it. Each event is numbered, stamped and written in the same batch as the change that
// caused it; memory keeps the newest store::kEventsLoaded (the owners want the recent ones, and a
// bounded window keeps listing cheap), the store keeps every one for audit.
//
// Owns: the events and their numbering; nothing else appends. Reads: the directory's teams, so
// that naming another team answers NotFound. Threading: allotd's I/O thread.

#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "control/principal.h"
#include "model/model.h"
#include "store/store.h"

namespace allot::control {

// Which events `GET /events` lists; empty fields match everything.
struct EventFilter {
  std::string team{};
  int64_t jobId = 0;
  std::optional<model::EventKind> kind{};
  TimeMs since = 0;  // at or after
  size_t limit = 100;
};

class EventLog {
 public:
  EventLog(const Clock& clock, const std::map<std::string, model::Team>& teams)
      : clock_(clock), teams_(teams) {}

  // At start: the newest events the store holds, oldest first.
  void load(const std::vector<model::Event>& stored);

  // Numbers, stamps and keeps `e`, and adds its write to `batch`.
  model::Event& append(model::Event e, store::WriteBatch& batch);
  // An event about a job, with its team, project, user and hosts.
  model::Event& appendForJob(model::EventKind kind, const model::Job& j, std::string message,
                             const nlohmann::json& details, store::WriteBatch& batch);

  // The newest `limit` of those matching, oldest first; members see their own team's (naming
  // another team is NotFound).
  Result<std::vector<model::Event>> list(const Principal& p, const EventFilter& f) const;

  int64_t nextId() const { return nextId_; }

 private:
  const Clock& clock_;
  const std::map<std::string, model::Team>& teams_;
  std::deque<model::Event> events_;  // oldest first
  int64_t nextId_ = 1;
};

}  // namespace allot::control
