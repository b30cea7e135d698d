#pragma once
// Store: durable state of the control plane. allotd keeps the live world in memory and loads it
// from the store at start; every change goes to the store as a WriteBatch before it is
// acknowledged. The interface speaks in domain values only, so a PostgreSQL backend can sit
// behind it without changes above.
//
// Durability: when `commit` returns ok, or `submit`'s callback runs with ok, the batch is on
// disk. Batches are applied in the order they were handed in, so a later completion implies
// every earlier batch is durable too. Implementations group concurrent batches into one
// transaction (group commit) so that durability does not cost throughput.

#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"
#include "model/audit.h"
#include "model/model.h"

namespace allot::store {

// One change. Upserts replace the whole row keyed by the value's id/name.
struct PutTeam {
  model::Team team;
};
struct PutUser {
  model::User user;
};
struct PutToken {
  model::ApiToken token;
};
struct DeleteToken {
  std::string id;
};
struct PutProject {
  model::Project project;
};
struct PutJoinToken {
  model::JoinToken token;
};
struct PutHost {
  model::Host host;
};
struct PutJob {
  model::Job job;
};
// Small named values: id counters and the like.
struct PutMeta {
  std::string key;
  std::string value;
};

// Appends one ledger entry; never replaces one (a second entry with the same seq fails the batch).
struct AppendLedger {
  model::LedgerEntry entry;
};

// Appends one event (model::Event); never replaces one, like the ledger.
struct AppendEvent {
  model::Event event;
};

// Appends one change of a host's admin state (model::HostTransition); never replaces one.
struct AppendHostTransition {
  model::HostTransition transition;
};

// A rolling upgrade (model::Upgrade), replaced whole as it advances.
struct PutUpgrade {
  model::Upgrade upgrade;
};

// A lease (model::Lease), replaced whole; leases are never deleted (they are the record).
struct PutLease {
  model::Lease lease;
};

// A session profile (model::Profile), replaced whole; and its removal by name.
struct PutProfile {
  model::Profile profile;
};
struct DeleteProfile {
  std::string name;
};

// Appends one audit entry (model::AuditEntry); the store assigns its id. Never replaces one.
struct AppendAudit {
  model::AuditEntry entry;
};

using WriteOp =
    std::variant<PutTeam, PutUser, PutToken, DeleteToken, PutProject, PutJoinToken, PutHost, PutJob,
                 PutMeta, AppendLedger, AppendEvent, AppendHostTransition, PutUpgrade, PutLease,
                 AppendAudit, PutProfile, DeleteProfile>;

// loadAll reads back at most this many events, the newest; older ones stay in the store.
inline constexpr size_t kEventsLoaded = 10'000;

struct WriteBatch {
  std::vector<WriteOp> ops;
  template <typename Op>
  WriteBatch& add(Op op) {
    ops.emplace_back(std::move(op));
    return *this;
  }
  bool empty() const { return ops.empty(); }
};

// Everything the store holds, as loaded at start.
struct Contents {
  std::vector<model::Team> teams;
  std::vector<model::User> users;
  std::vector<model::ApiToken> tokens;
  std::vector<model::Project> projects;
  std::vector<model::JoinToken> joinTokens;
  std::vector<model::Host> hosts;
  std::vector<model::Job> jobs;
  std::vector<std::pair<std::string, std::string>> meta;
  std::vector<model::LedgerEntry> ledger;  // in seq order
  std::vector<model::Event> events;        // the newest kEventsLoaded, in id order
  // Every one: people change admin states by hand, so there are few (a busy fleet: thousands).
  std::vector<model::HostTransition> hostTransitions;  // in id order
  std::vector<model::Upgrade> upgrades;                // in id order (few: people start them)
  std::vector<model::Lease> leases;                    // every one, in id order
  std::vector<model::Profile> profiles;                // every one, by name
};

// Which audit entries to read (Store::queryAudit). Empty strings and zeros filter nothing.
struct AuditQuery {
  TimeMs since = 0;  // at >= since
  TimeMs until = 0;  // at < until
  std::string actor{};
  // The object itself or anything under it: "host:gpu-01" also matches "host:gpu-01/gpu:3".
  std::string object{};
  int64_t afterId = 0;   // id > afterId
  int64_t beforeId = 0;  // id < beforeId
  bool newestFirst = false;
  size_t limit = 100;
};

class Store {
 public:
  virtual ~Store() = default;

  // Reads every row. Called once at start, before any write.
  virtual Result<Contents> loadAll() = 0;

  // Applies the batch durably and returns when it is on disk. Blocks the caller.
  virtual Status commit(WriteBatch batch) = 0;

  // Queues the batch for the next group commit; `done` runs on the store's writer thread once
  // the batch is durable (or failed). Never blocks on disk. Batches reach the disk in the order
  // they were submitted, and none after one that failed: the store always holds a prefix of
  // them (a later batch may build on an earlier one, a placement on its job's submission).
  virtual void submit(WriteBatch batch, std::function<void(Status)> done) = 0;

  // Reads audit entries (never loaded by loadAll: the log grows without bound), in id order or
  // its reverse, at most q.limit. May run alongside writes; sees every batch already durable.
  virtual Result<std::vector<model::AuditEntry>> queryAudit(const AuditQuery& q) = 0;

  // Schema version this store is at, after migrations.
  virtual int schemaVersion() const = 0;
};

}  // namespace allot::store
