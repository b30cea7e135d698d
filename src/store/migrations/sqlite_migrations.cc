#include "store/migrations/sqlite_migrations.h"

#include <array>
#include <string>

#include "store/migrations/schema_sql.h"

namespace allot::store {
namespace {

// Keys and the fields someone filters on are real columns; hosts and jobs also carry their full
// store document (store/documents.h) in `doc`, which is what loadAll reads back. Times are Unix
// milliseconds. Columns are NOT NULL with '' / 0 for "none", matching the model's conventions.
constexpr std::string_view kV1Initial = R"sql(
CREATE TABLE teams (
  name       TEXT PRIMARY KEY,
  created_ms INTEGER NOT NULL
);

CREATE TABLE users (
  name       TEXT PRIMARY KEY,
  team       TEXT NOT NULL,
  role       TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE INDEX users_by_team ON users (team);

CREATE TABLE tokens (
  id         TEXT PRIMARY KEY,
  owner      TEXT NOT NULL,
  hash       TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL
);
CREATE INDEX tokens_by_hash ON tokens (hash);
CREATE INDEX tokens_by_owner ON tokens (owner);

CREATE TABLE projects (
  name       TEXT PRIMARY KEY,
  team       TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE INDEX projects_by_team ON projects (team);

CREATE TABLE join_tokens (
  id         TEXT PRIMARY KEY,
  hash       TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL
);
CREATE INDEX join_tokens_by_hash ON join_tokens (hash);

CREATE TABLE hosts (
  name                 TEXT PRIMARY KEY,
  state                TEXT NOT NULL,
  joined_ms            INTEGER NOT NULL,
  last_seen_ms         INTEGER NOT NULL,
  unreachable_since_ms INTEGER NOT NULL,
  doc                  TEXT NOT NULL
);

CREATE TABLE jobs (
  id           INTEGER PRIMARY KEY,
  name         TEXT NOT NULL,
  team         TEXT NOT NULL,
  project      TEXT NOT NULL,
  user_name    TEXT NOT NULL,
  state        TEXT NOT NULL,
  host         TEXT NOT NULL,
  submitted_ms INTEGER NOT NULL,
  finished_ms  INTEGER NOT NULL,
  doc          TEXT NOT NULL
);
CREATE INDEX jobs_by_state ON jobs (state);
CREATE INDEX jobs_by_team_state ON jobs (team, state);
CREATE INDEX jobs_by_user ON jobs (user_name);
CREATE INDEX jobs_by_host ON jobs (host);

CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
)sql";

// Quotas: teams and projects gain a document (quota settings, usage history, a project's split of
// its team's guarantee), '{}' for rows written before, which loads as every default. Projects
// were keyed by name alone, so two teams' projects of one name shared a row; they are now keyed
// by (team, name), which also serves lookups by team.
constexpr std::string_view kV2Quotas = R"sql(
ALTER TABLE teams ADD COLUMN doc TEXT NOT NULL DEFAULT '{}';

CREATE TABLE projects_v2 (
  name       TEXT NOT NULL,
  team       TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  doc        TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (team, name)
);
INSERT INTO projects_v2 (name, team, created_ms) SELECT name, team, created_ms FROM projects;
DROP TABLE projects;
ALTER TABLE projects_v2 RENAME TO projects;
)sql";

// Accounting: the allocation ledger, append-only (one row per entry, see model::LedgerEntry).
// Triggers refuse updates and deletes, so a bug cannot rewrite history. gpu_indices is a
// comma-separated list. Close and correction rows leave the open entry's columns empty.
constexpr std::string_view kV3LedgerTables = R"sql(
CREATE TABLE ledger (
  seq         INTEGER PRIMARY KEY,
  kind        TEXT NOT NULL,
  ref         INTEGER NOT NULL,
  job_id      INTEGER NOT NULL,
  team        TEXT NOT NULL,
  project     TEXT NOT NULL,
  user_name   TEXT NOT NULL,
  host        TEXT NOT NULL,
  gpu_model   TEXT NOT NULL,
  gpu_indices TEXT NOT NULL,
  gpu_milli   INTEGER NOT NULL,
  start_ms    INTEGER NOT NULL,
  end_ms      INTEGER NOT NULL,
  reason      TEXT NOT NULL
);
CREATE INDEX ledger_by_job ON ledger (job_id);
)sql";

// Events about allocations (idle, busy again, reclaimed), append-only like the ledger. hosts is a
// comma-separated list; details a JSON object.
constexpr std::string_view kV4EventsTables = R"sql(
CREATE TABLE events (
  id        INTEGER PRIMARY KEY,
  at_ms     INTEGER NOT NULL,
  kind      TEXT NOT NULL,
  team      TEXT NOT NULL,
  project   TEXT NOT NULL,
  user_name TEXT NOT NULL,
  job_id    INTEGER NOT NULL,
  hosts     TEXT NOT NULL,
  message   TEXT NOT NULL,
  details   TEXT NOT NULL
);
CREATE INDEX events_by_team ON events (team, id);
CREATE INDEX events_by_job ON events (job_id);
)sql";

// Host lifecycle: every change of a host's admin state (available, draining, maintenance, ...),
// append-only like the ledger. The admin state itself lives in the host's document.
constexpr std::string_view kV5HostTransitionsTables = R"sql(
CREATE TABLE host_transitions (
  id         INTEGER PRIMARY KEY,
  host       TEXT NOT NULL,
  at_ms      INTEGER NOT NULL,
  by_name    TEXT NOT NULL,
  from_state TEXT NOT NULL,
  to_state   TEXT NOT NULL,
  reason     TEXT NOT NULL,
  output     TEXT NOT NULL
);
CREATE INDEX host_transitions_by_host ON host_transitions (host, id);
)sql";

// Time-boxed leases of hosts to teams (docs/leases.md). The document holds the whole lease; the
// columns serve lookups by team and by state.
constexpr std::string_view kV6Leases = R"sql(
CREATE TABLE leases (
  id       INTEGER PRIMARY KEY,
  team     TEXT NOT NULL,
  state    TEXT NOT NULL,
  start_ms INTEGER NOT NULL,
  end_ms   INTEGER NOT NULL,
  doc      TEXT NOT NULL
);
CREATE INDEX leases_by_team ON leases (team, id);
)sql";

// Rolling upgrades: the whole upgrade (its hosts' steps included) in `doc`; pool and state are
// columns for "is one running in this pool".
constexpr std::string_view kV7Upgrades = R"sql(
CREATE TABLE upgrades (
  id         INTEGER PRIMARY KEY,
  pool       TEXT NOT NULL,
  state      TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  doc        TEXT NOT NULL
);
CREATE INDEX upgrades_by_pool ON upgrades (pool, state);
)sql";

// Identity: users gain a document (their teams with a role in each, the platform-admin flag, kind,
// source, password hash, Unix identity); the team and role columns keep the user's first team and
// role for readers of the table. Tokens gain a document (name, kind). '{}' rows, written before,
// load from their columns.
constexpr std::string_view kV8Identity = R"sql(
ALTER TABLE users ADD COLUMN doc TEXT NOT NULL DEFAULT '{}';
ALTER TABLE tokens ADD COLUMN doc TEXT NOT NULL DEFAULT '{}';
)sql";

// The audit log (docs/audit.md): one row per change made through the API, append-only like the
// ledger. request, before and after are JSON texts with secrets already redacted. The id is
// assigned here (rowid) in commit order; readers page on it.
constexpr std::string_view kV9AuditTables = R"sql(
CREATE TABLE audit (
  id         INTEGER PRIMARY KEY,
  at_ms      INTEGER NOT NULL,
  actor      TEXT NOT NULL,
  actor_kind TEXT NOT NULL,
  address    TEXT NOT NULL,
  action     TEXT NOT NULL,
  object     TEXT NOT NULL,
  status     INTEGER NOT NULL,
  request    TEXT NOT NULL,
  before     TEXT NOT NULL,
  after      TEXT NOT NULL
);
CREATE INDEX audit_by_at ON audit (at_ms);
CREATE INDEX audit_by_actor ON audit (actor, id);
CREATE INDEX audit_by_object ON audit (object, id);
)sql";

// Join tokens become limited: `uses` joins in all, `used` counted in the commit of each join,
// revoked by an admin at `revoked_ms` (0 = not). Tokens made before were reusable until they
// expired; they keep one use, so a token handed out for a host not yet joined still works once.
constexpr std::string_view kV10JoinTokenUses = R"sql(
ALTER TABLE join_tokens ADD COLUMN uses INTEGER NOT NULL DEFAULT 1;
ALTER TABLE join_tokens ADD COLUMN used INTEGER NOT NULL DEFAULT 0;
ALTER TABLE join_tokens ADD COLUMN revoked_ms INTEGER NOT NULL DEFAULT 0;
)sql";

// Session profiles (docs/sessions.md): the whole profile in `doc`, keyed by its cluster-wide name;
// team is '' for a platform-wide one. The default `jupyter` profile is made here, once: an admin
// who deletes or changes it is not overruled by the next start.
constexpr std::string_view kV11Profiles = R"sql(
CREATE TABLE profiles (
  name       TEXT PRIMARY KEY,
  team       TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  doc        TEXT NOT NULL
);
CREATE INDEX profiles_by_team ON profiles (team, name);
INSERT INTO profiles (name, team, created_ms, doc) VALUES ('jupyter', '', 0,
  '{"name":"jupyter","team":"","description":"Jupyter (jupyter-server) on the host; for hosts where Jupyter is installed","command":["jupyter-server"],"env":{},"defaults":{"gpus":0,"gpu_milli":1000,"cpu_millis":0,"memory_mib":0},"maxima":{"gpus":0,"cpu_millis":0,"memory_mib":0},"storage":["scratch","local"],"idle_threshold_percent":5.0,"idle_after_ms":1800000,"max_lifetime_ms":0,"visible_to":[],"created_by":"allotd","created_ms":0}');
)sql";

// Indexes that no statement of allotd's reads: jobs, the ledger and events are read back whole
// when allotd starts (loadAll) and queried in memory after that. Each was kept up to date on
// every write all the same: a job's submission wrote 14 pages to the WAL, now 9, and each later
// change of the job 4-5, now 1 (docs/benchmarks.md, section 1). The columns stay, for an
// operator's own SQL.
constexpr std::string_view kV12UnreadIndexes = R"sql(
DROP INDEX IF EXISTS jobs_by_state;
DROP INDEX IF EXISTS jobs_by_team_state;
DROP INDEX IF EXISTS jobs_by_user;
DROP INDEX IF EXISTS jobs_by_host;
DROP INDEX IF EXISTS ledger_by_job;
DROP INDEX IF EXISTS events_by_team;
DROP INDEX IF EXISTS events_by_job;
)sql";

}  // namespace

std::span<const Migration> sqliteMigrations() {
  // The append-only logs' steps end in their triggers; built once, kept for the process.
  static const std::string kV3Ledger =
      std::string(kV3LedgerTables) + appendOnlyTriggers("ledger", "the ledger is append-only");
  static const std::string kV4Events =
      std::string(kV4EventsTables) + appendOnlyTriggers("events", "events are append-only");
  static const std::string kV5HostTransitions =
      std::string(kV5HostTransitionsTables) +
      appendOnlyTriggers("host_transitions", "host transitions are append-only");
  static const std::string kV9Audit =
      std::string(kV9AuditTables) + appendOnlyTriggers("audit", "the audit log is append-only");
  static const std::array kMigrations = {
      Migration{1, "initial schema", kV1Initial},
      Migration{2, "team quotas and project splits", kV2Quotas},
      Migration{3, "allocation ledger", kV3Ledger},
      Migration{4, "allocation events", kV4Events},
      Migration{5, "host admin-state transitions", kV5HostTransitions},
      Migration{6, "leases", kV6Leases},
      Migration{7, "rolling upgrades", kV7Upgrades},
      Migration{8, "user documents: teams, roles, credentials", kV8Identity},
      Migration{9, "audit log", kV9Audit},
      Migration{10, "limited-use join tokens", kV10JoinTokenUses},
      Migration{11, "session profiles, with the default jupyter profile", kV11Profiles},
      Migration{12, "drop the indexes no query reads", kV12UnreadIndexes},
  };
  return kMigrations;
}

}  // namespace allot::store
