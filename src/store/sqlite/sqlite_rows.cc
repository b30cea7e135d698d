#include "store/sqlite/sqlite_rows.h"

#include <algorithm>
#include <charconv>
#include <exception>
#include <functional>
#include <string>

#include "model/json.h"
#include "store/documents.h"

namespace allot::store::sqlite {
namespace {

// A document's text. The API admits only UTF-8 (common/utf8.h), so nothing is replaced in
// practice; but a write that has been acknowledged must not fail on one bad byte, whatever
// path it came by, so the encoder replaces instead of throwing.
std::string docText(const nlohmann::json& doc) {
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Upserts replace every column, so a put always leaves exactly the value handed in.
constexpr std::string_view kPutTeam =
    "INSERT INTO teams (name, created_ms, doc) VALUES (?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET created_ms = excluded.created_ms, doc = excluded.doc";
constexpr std::string_view kPutUser =
    "INSERT INTO users (name, team, role, created_ms, doc) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET team = excluded.team, role = excluded.role, "
    "created_ms = excluded.created_ms, doc = excluded.doc";
constexpr std::string_view kPutToken =
    "INSERT INTO tokens (id, owner, hash, created_ms, expires_ms, doc) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, hash = excluded.hash, "
    "created_ms = excluded.created_ms, expires_ms = excluded.expires_ms, doc = excluded.doc";
constexpr std::string_view kDeleteToken = "DELETE FROM tokens WHERE id = ?";
constexpr std::string_view kPutProject =
    "INSERT INTO projects (name, team, created_ms, doc) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (team, name) DO UPDATE SET created_ms = excluded.created_ms, doc = excluded.doc";
constexpr std::string_view kPutJoinToken =
    "INSERT INTO join_tokens (id, hash, created_by, created_ms, expires_ms, uses, used, "
    "revoked_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET hash = excluded.hash, created_by = excluded.created_by, "
    "created_ms = excluded.created_ms, expires_ms = excluded.expires_ms, uses = excluded.uses, "
    "used = excluded.used, revoked_ms = excluded.revoked_ms";
constexpr std::string_view kPutHost =
    "INSERT INTO hosts (name, state, joined_ms, last_seen_ms, unreachable_since_ms, doc) "
    "VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET state = excluded.state, joined_ms = excluded.joined_ms, "
    "last_seen_ms = excluded.last_seen_ms, "
    "unreachable_since_ms = excluded.unreachable_since_ms, doc = excluded.doc";
constexpr std::string_view kPutJob =
    "INSERT INTO jobs (id, name, team, project, user_name, state, host, submitted_ms, "
    "finished_ms, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET name = excluded.name, team = excluded.team, "
    "project = excluded.project, user_name = excluded.user_name, state = excluded.state, "
    "host = excluded.host, submitted_ms = excluded.submitted_ms, "
    "finished_ms = excluded.finished_ms, doc = excluded.doc";
constexpr std::string_view kPutMeta =
    "INSERT INTO meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value";
constexpr std::string_view kAppendLedger =
    "INSERT INTO ledger (seq, kind, ref, job_id, team, project, user_name, host, gpu_model, "
    "gpu_indices, gpu_milli, start_ms, end_ms, reason) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

constexpr std::string_view kAppendEvent =
    "INSERT INTO events (id, at_ms, kind, team, project, user_name, job_id, hosts, message, "
    "details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

constexpr std::string_view kPutLease =
    "INSERT INTO leases (id, team, state, start_ms, end_ms, doc) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET team = excluded.team, state = excluded.state, "
    "start_ms = excluded.start_ms, end_ms = excluded.end_ms, doc = excluded.doc";

constexpr std::string_view kAppendHostTransition =
    "INSERT INTO host_transitions (id, host, at_ms, by_name, from_state, to_state, reason, output) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)";

constexpr std::string_view kPutUpgrade =
    "INSERT INTO upgrades (id, pool, state, created_ms, doc) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET pool = excluded.pool, state = excluded.state, "
    "created_ms = excluded.created_ms, doc = excluded.doc";

constexpr std::string_view kPutProfile =
    "INSERT INTO profiles (name, team, created_ms, doc) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET team = excluded.team, created_ms = excluded.created_ms, "
    "doc = excluded.doc";
constexpr std::string_view kDeleteProfile = "DELETE FROM profiles WHERE name = ?";

// id is left out: SQLite assigns the next rowid, so ids follow commit order.
constexpr std::string_view kAppendAudit =
    "INSERT INTO audit (at_ms, actor, actor_kind, address, action, object, status, request, "
    "before, after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

std::string joinStrings(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::vector<std::string> splitStrings(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

std::string joinIndices(const std::vector<int>& v) {
  std::string out;
  for (int i : v) {
    if (!out.empty()) out += ',';
    out += std::to_string(i);
  }
  return out;
}

std::optional<std::vector<int>> splitIndices(const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    int v = 0;
    auto [p, ec] = std::from_chars(s.data() + pos, s.data() + comma, v);
    if (ec != std::errc() || p != s.data() + comma) return std::nullopt;
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

// Runs `body`, turning an exception from encoding (nlohmann throws on invalid UTF-8) into a
// Status, and adds the row's name to any error.
Status guarded(const std::string& what, const std::function<Status()>& body) {
  try {
    Status st = body();
    return st.ok() ? st : st.withContext("failed to write " + what);
  } catch (const model::json::exception& e) {
    return Status::InvalidArgument("failed to write " + what + ": " + e.what());
  } catch (const std::exception& e) {
    return Status::Internal("failed to write " + what + ": " + e.what());
  }
}

std::string jobLabel(int64_t id) { return "job " + std::to_string(id); }

std::optional<model::HostState> parseHostState(const std::string& s) {
  if (s == model::hostStateName(model::HostState::kOnline)) return model::HostState::kOnline;
  if (s == model::hostStateName(model::HostState::kUnreachable)) {
    return model::HostState::kUnreachable;
  }
  return std::nullopt;
}

// Steps through every row of `sql`, calling `row` for each; stops at the first error.
Status forEachRow(sqlite3* db, std::string_view sql,
                  const std::function<Status(sqlite3_stmt*)>& row) {
  auto stmt = prepare(db, sql);
  if (!stmt.ok()) return stmt.status();
  for (;;) {
    int rc = sqlite3_step(stmt->get());
    if (rc == SQLITE_DONE) return Status::Ok();
    if (rc != SQLITE_ROW) return lastError(db, rc, "failed to read rows");
    ALLOT_RETURN_IF_ERROR(row(stmt->get()));
  }
}

// Decodes a stored document; a row that does not parse is corruption, not a user error. The model's
// decoders return a Result; only the parse here may throw, and it is caught here.
template <typename T>
Result<T> fromDoc(const std::string& doc, Result<T> (*decode)(const model::json&)) {
  model::json parsed;
  try {
    parsed = model::json::parse(doc);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("stored document does not decode: ") + e.what());
  }
  return decode(parsed);
}

// forEachRow over one table, naming it in an error: "failed to load <what>: ...".
Status loadRows(sqlite3* db, std::string_view sql, const std::string& what,
                const std::function<Status(sqlite3_stmt*)>& row) {
  Status st = forEachRow(db, sql, row);
  return st.ok() ? st : st.withContext("failed to load " + what);
}

// A table whose document is the whole value, read in key order; a row that does not decode is
// named "<kind> <key>".
template <typename T>
Status loadDocs(sqlite3* db, const std::string& table, const std::string& key, const char* kind,
                Result<T> (*decode)(const model::json&), std::vector<T>& out) {
  return loadRows(db, "SELECT " + key + ", doc FROM " + table + " ORDER BY " + key, table,
                  [&](sqlite3_stmt* s) {
                    auto value = fromDoc<T>(columnText(s, 1), decode);
                    if (!value.ok()) {
                      return value.status().withContext(std::string(kind) + " " + columnText(s, 0));
                    }
                    out.push_back(std::move(value).value());
                    return Status::Ok();
                  });
}

}  // namespace

Result<WriteStatements> WriteStatements::prepareAll(sqlite3* db) {
  WriteStatements s;
  struct Entry {
    StmtHandle* slot;
    std::string_view sql;
  };
  const Entry entries[] = {
      {&s.team_, kPutTeam},
      {&s.user_, kPutUser},
      {&s.token_, kPutToken},
      {&s.deleteToken_, kDeleteToken},
      {&s.project_, kPutProject},
      {&s.joinToken_, kPutJoinToken},
      {&s.host_, kPutHost},
      {&s.job_, kPutJob},
      {&s.meta_, kPutMeta},
      {&s.ledger_, kAppendLedger},
      {&s.event_, kAppendEvent},
      {&s.hostTransition_, kAppendHostTransition},
      {&s.upgrade_, kPutUpgrade},
      {&s.lease_, kPutLease},
      {&s.audit_, kAppendAudit},
      {&s.profile_, kPutProfile},
      {&s.deleteProfile_, kDeleteProfile},
      {&s.begin_, "BEGIN IMMEDIATE"},
      {&s.commit_, "COMMIT"},
      {&s.rollback_, "ROLLBACK"},
  };
  for (const Entry& e : entries) {
    auto stmt = prepare(db, e.sql, /*persistent=*/true);
    if (!stmt.ok()) return stmt.status();
    *e.slot = std::move(stmt).value();
  }
  return s;
}

Status WriteStatements::apply(const WriteOp& op) {
  return std::visit([this](const auto& o) { return put(o); }, op);
}

Status WriteStatements::begin() { return Binder(begin_.get()).run(); }

Status WriteStatements::commit() { return Binder(commit_.get()).run(); }

void WriteStatements::rollback() {
  if (sqlite3_get_autocommit(sqlite3_db_handle(rollback_.get())) != 0) return;
  // A failed rollback leaves nothing to do but report the error that led here, which the caller
  // already holds; SQLite rolls back on its own when the connection closes.
  (void)Binder(rollback_.get()).run();
}

Status WriteStatements::put(const PutTeam& op) {
  const model::Team& t = op.team;
  return guarded("team " + t.name, [&] {
    const std::string doc = docText(toStoreDoc(t));
    return Binder(team_.get()).text(t.name).integer(t.createdAt).text(doc).run();
  });
}

Status WriteStatements::put(const PutUser& op) {
  const model::User& u = op.user;
  return guarded("user " + u.name, [&] {
    // The columns keep the first team and its role (platform-admin for admins) for readers of
    // the table; the document is the truth.
    const std::string team = u.teams.empty() ? "" : u.teams.begin()->first;
    const model::Role role = u.platformAdmin   ? model::Role::kPlatformAdmin
                             : u.teams.empty() ? model::Role::kMember
                                               : u.teams.begin()->second;
    const std::string doc = docText(toStoreDoc(u));
    return Binder(user_.get())
        .text(u.name)
        .text(team)
        .text(model::roleName(role))
        .integer(u.createdAt)
        .text(doc)
        .run();
  });
}

Status WriteStatements::put(const PutToken& op) {
  const model::ApiToken& t = op.token;
  return guarded("token " + t.id, [&] {
    return Binder(token_.get())
        .text(t.id)
        .text(t.owner)
        .text(t.hash)
        .integer(t.createdAt)
        .integer(t.expiresAt)
        .text(docText({{"name", t.name}, {"kind", model::tokenKindName(t.kind)}}))
        .run();
  });
}

Status WriteStatements::put(const DeleteToken& op) {
  return guarded("token " + op.id + " (delete)",
                 [&] { return Binder(deleteToken_.get()).text(op.id).run(); });
}

Status WriteStatements::put(const PutProject& op) {
  const model::Project& p = op.project;
  return guarded("project " + p.team + "/" + p.name, [&] {
    const std::string doc = docText(toStoreDoc(p));
    return Binder(project_.get()).text(p.name).text(p.team).integer(p.createdAt).text(doc).run();
  });
}

Status WriteStatements::put(const PutJoinToken& op) {
  const model::JoinToken& t = op.token;
  return guarded("join token " + t.id, [&] {
    return Binder(joinToken_.get())
        .text(t.id)
        .text(t.hash)
        .text(t.createdBy)
        .integer(t.createdAt)
        .integer(t.expiresAt)
        .integer(t.uses)
        .integer(t.used)
        .integer(t.revokedAt)
        .run();
  });
}

// The host document leaves out state and unreachable_since (they describe the connection, not the
// machine); the columns keep them so a load gives back exactly what was put.
Status WriteStatements::put(const PutHost& op) {
  const model::Host& h = op.host;
  return guarded("host " + h.name, [&] {
    const std::string doc = docText(toStoreDoc(h));
    return Binder(host_.get())
        .text(h.name)
        .text(model::hostStateName(h.state))
        .integer(h.joinedAt)
        .integer(h.lastSeenAt)
        .integer(h.unreachableSince)
        .text(doc)
        .run();
  });
}

Status WriteStatements::put(const PutJob& op) {
  const model::Job& j = op.job;
  return guarded(jobLabel(j.id), [&] {
    const std::string doc = storeDocText(j);
    return Binder(job_.get())
        .integer(j.id)
        .text(j.name)
        .text(j.team)
        .text(j.project)
        .text(j.user)
        .text(model::jobStateName(j.state))
        .text(firstRank(j).host)
        .integer(j.submittedAt)
        .integer(j.finishedAt)
        .text(doc)
        .run();
  });
}

Status WriteStatements::put(const PutUpgrade& op) {
  const model::Upgrade& u = op.upgrade;
  return guarded("upgrade " + std::to_string(u.id), [&] {
    const std::string doc = docText(toStoreDoc(u));
    return Binder(upgrade_.get())
        .integer(u.id)
        .text(u.pool)
        .text(model::upgradeStateName(u.state))
        .integer(u.createdAt)
        .text(doc)
        .run();
  });
}

Status WriteStatements::put(const PutLease& op) {
  const model::Lease& l = op.lease;
  return guarded("lease " + std::to_string(l.id), [&] {
    const std::string doc = docText(toStoreDoc(l));
    return Binder(lease_.get())
        .integer(l.id)
        .text(l.team)
        .text(model::leaseStateName(l.state))
        .integer(l.startAt)
        .integer(l.endAt)
        .text(doc)
        .run();
  });
}

Status WriteStatements::put(const PutProfile& op) {
  const model::Profile& p = op.profile;
  return guarded("profile " + p.name, [&] {
    const std::string doc = docText(toStoreDoc(p));
    return Binder(profile_.get()).text(p.name).text(p.team).integer(p.createdAt).text(doc).run();
  });
}

Status WriteStatements::put(const DeleteProfile& op) {
  return guarded("profile " + op.name,
                 [&] { return Binder(deleteProfile_.get()).text(op.name).run(); });
}

Status WriteStatements::put(const PutMeta& op) {
  return guarded("meta " + op.key,
                 [&] { return Binder(meta_.get()).text(op.key).text(op.value).run(); });
}

Status WriteStatements::put(const AppendLedger& op) {
  const model::LedgerEntry& e = op.entry;
  return guarded("ledger entry " + std::to_string(e.seq) + " of " + jobLabel(e.jobId), [&] {
    return Binder(ledger_.get())
        .integer(e.seq)
        .text(model::ledgerKindName(e.kind))
        .integer(e.ref)
        .integer(e.jobId)
        .text(e.team)
        .text(e.project)
        .text(e.user)
        .text(e.host)
        .text(e.gpuModel)
        .text(joinIndices(e.gpuIndices))
        .integer(e.gpuMilli)
        .integer(e.startAt)
        .integer(e.endAt)
        .text(e.reason)
        .run();
  });
}

Status WriteStatements::put(const AppendEvent& op) {
  const model::Event& e = op.event;
  return guarded("event " + std::to_string(e.id) + " of " + jobLabel(e.jobId), [&] {
    return Binder(event_.get())
        .integer(e.id)
        .integer(e.at)
        .text(model::eventKindName(e.kind))
        .text(e.team)
        .text(e.project)
        .text(e.user)
        .integer(e.jobId)
        .text(joinStrings(e.hosts))
        .text(e.message)
        .text(e.details)
        .run();
  });
}

Status WriteStatements::put(const AppendAudit& op) {
  const model::AuditEntry& e = op.entry;
  return guarded("audit entry for " + e.action, [&] {
    return Binder(audit_.get())
        .integer(e.at)
        .text(e.actor)
        .text(e.actorKind)
        .text(e.address)
        .text(e.action)
        .text(e.object)
        .integer(e.status)
        .text(e.request)
        .text(e.before)
        .text(e.after)
        .run();
  });
}

Status WriteStatements::put(const AppendHostTransition& op) {
  const model::HostTransition& t = op.transition;
  return guarded("host transition " + std::to_string(t.id) + " of host " + t.host, [&] {
    return Binder(hostTransition_.get())
        .integer(t.id)
        .text(t.host)
        .integer(t.at)
        .text(t.by)
        .text(model::adminStateName(t.from))
        .text(model::adminStateName(t.to))
        .text(t.reason)
        .text(t.output)
        .run();
  });
}

Result<Contents> loadContents(sqlite3* db) {
  Contents c;
  // Teams and projects: the columns are the truth for their keys; the document carries the rest.
  ALLOT_RETURN_IF_ERROR(loadRows(
      db, "SELECT name, created_ms, doc FROM teams ORDER BY name", "teams", [&](sqlite3_stmt* s) {
        const std::string name = columnText(s, 0);
        auto team = fromDoc<model::Team>(columnText(s, 2), &teamFromStoreDoc);
        if (!team.ok()) return team.status().withContext("team " + name);
        team->name = name;
        team->createdAt = columnInt(s, 1);
        c.teams.push_back(std::move(team).value());
        return Status::Ok();
      }));

  ALLOT_RETURN_IF_ERROR(loadRows(
      db, "SELECT name, team, role, created_ms, doc FROM users ORDER BY name", "users",
      [&](sqlite3_stmt* s) {
        const std::string name = columnText(s, 0);
        const std::string docText = columnText(s, 4);
        auto user = fromDoc<model::User>(docText, &userFromStoreDoc);
        if (!user.ok()) return user.status().withContext("user " + name);
        user->name = name;
        user->createdAt = columnInt(s, 3);
        if (docText == "{}") {  // written before schema 8: one team and one role, in columns
          const std::string role = columnText(s, 2);
          auto parsed = model::parseRole(role);
          if (!parsed) return Status::Internal("user " + name + " has unknown role '" + role + "'");
          user->platformAdmin = *parsed == model::Role::kPlatformAdmin;
          if (const std::string team = columnText(s, 1); !team.empty())
            user->teams[team] = user->platformAdmin ? model::Role::kTeamAdmin : *parsed;
        }
        c.users.push_back(std::move(user).value());
        return Status::Ok();
      }));

  ALLOT_RETURN_IF_ERROR(
      loadRows(db, "SELECT id, owner, hash, created_ms, expires_ms, doc FROM tokens ORDER BY id",
               "tokens", [&](sqlite3_stmt* s) {
                 model::ApiToken t{columnText(s, 0), columnText(s, 1), columnText(s, 2),
                                   columnInt(s, 3), columnInt(s, 4)};
                 auto doc = nlohmann::json::parse(columnText(s, 5), nullptr, false);
                 if (doc.is_discarded() || !doc.is_object())
                   return Status::Internal("token " + t.id + " has a corrupt document");
                 t.name = doc.value("name", "");
                 const std::string kind = doc.value("kind", "");
                 t.kind = kind == "session" ? model::TokenKind::kSession
                          : kind == "host" || t.owner.starts_with("host:") ? model::TokenKind::kHost
                                                                           : model::TokenKind::kApi;
                 c.tokens.push_back(std::move(t));
                 return Status::Ok();
               }));

  ALLOT_RETURN_IF_ERROR(
      loadRows(db, "SELECT name, team, created_ms, doc FROM projects ORDER BY name, team",
               "projects", [&](sqlite3_stmt* s) {
                 const std::string name = columnText(s, 0);
                 const std::string team = columnText(s, 1);
                 auto project = fromDoc<model::Project>(columnText(s, 3), &projectFromStoreDoc);
                 if (!project.ok())
                   return project.status().withContext("project " + team + "/" + name);
                 project->name = name;
                 project->team = team;
                 project->createdAt = columnInt(s, 2);
                 c.projects.push_back(std::move(project).value());
                 return Status::Ok();
               }));

  ALLOT_RETURN_IF_ERROR(loadRows(
      db,
      "SELECT id, hash, created_by, created_ms, expires_ms, uses, used, revoked_ms "
      "FROM join_tokens ORDER BY id",
      "join tokens", [&](sqlite3_stmt* s) {
        c.joinTokens.push_back({columnText(s, 0), columnText(s, 1), columnText(s, 2),
                                columnInt(s, 3), columnInt(s, 4), static_cast<int>(columnInt(s, 5)),
                                static_cast<int>(columnInt(s, 6)), columnInt(s, 7)});
        return Status::Ok();
      }));

  ALLOT_RETURN_IF_ERROR(
      loadRows(db, "SELECT name, state, unreachable_since_ms, doc FROM hosts ORDER BY name",
               "hosts", [&](sqlite3_stmt* s) {
                 const std::string name = columnText(s, 0);
                 auto host = fromDoc<model::Host>(columnText(s, 3), &hostFromStoreDoc);
                 if (!host.ok()) return host.status().withContext("host " + name);
                 const std::string state = columnText(s, 1);
                 auto parsed = parseHostState(state);
                 if (!parsed)
                   return Status::Internal("host " + name + " has unknown state '" + state + "'");
                 host->state = *parsed;
                 host->unreachableSince = columnInt(s, 2);
                 c.hosts.push_back(std::move(host).value());
                 return Status::Ok();
               }));

  ALLOT_RETURN_IF_ERROR(loadDocs(db, "jobs", "id", "job", &jobFromStoreDoc, c.jobs));

  ALLOT_RETURN_IF_ERROR(
      loadRows(db, "SELECT key, value FROM meta ORDER BY key", "meta", [&](sqlite3_stmt* s) {
        c.meta.emplace_back(columnText(s, 0), columnText(s, 1));
        return Status::Ok();
      }));

  ALLOT_RETURN_IF_ERROR(loadRows(
      db,
      "SELECT seq, kind, ref, job_id, team, project, user_name, host, gpu_model, gpu_indices, "
      "gpu_milli, start_ms, end_ms, reason FROM ledger ORDER BY seq",
      "the ledger", [&](sqlite3_stmt* s) {
        model::LedgerEntry e;
        e.seq = columnInt(s, 0);
        const std::string kind = columnText(s, 1);
        auto parsedKind = model::parseLedgerKind(kind);
        if (!parsedKind) {
          return Status::Internal("ledger entry " + std::to_string(e.seq) + " has unknown kind '" +
                                  kind + "'");
        }
        e.kind = *parsedKind;
        e.ref = columnInt(s, 2);
        e.jobId = columnInt(s, 3);
        e.team = columnText(s, 4);
        e.project = columnText(s, 5);
        e.user = columnText(s, 6);
        e.host = columnText(s, 7);
        e.gpuModel = columnText(s, 8);
        const std::string indices = columnText(s, 9);
        auto parsed = splitIndices(indices);
        if (!parsed) {
          return Status::Internal("ledger entry " + std::to_string(e.seq) +
                                  " has bad gpu_indices '" + indices + "'");
        }
        e.gpuIndices = std::move(*parsed);
        e.gpuMilli = static_cast<int>(columnInt(s, 10));
        e.startAt = columnInt(s, 11);
        e.endAt = columnInt(s, 12);
        e.reason = columnText(s, 13);
        c.ledger.push_back(std::move(e));
        return Status::Ok();
      }));

  // The newest events only: the API serves what memory holds (see Cluster::events).
  ALLOT_RETURN_IF_ERROR(
      loadRows(db,
               "SELECT id, at_ms, kind, team, project, user_name, job_id, hosts, message, "
               "details FROM events ORDER BY id DESC LIMIT " +
                   std::to_string(kEventsLoaded),
               "events", [&](sqlite3_stmt* s) {
                 model::Event e;
                 e.id = columnInt(s, 0);
                 e.at = columnInt(s, 1);
                 const std::string kind = columnText(s, 2);
                 auto parsed = model::parseEventKind(kind);
                 if (!parsed) {
                   return Status::Internal("event " + std::to_string(e.id) + " has unknown kind '" +
                                           kind + "'");
                 }
                 e.kind = *parsed;
                 e.team = columnText(s, 3);
                 e.project = columnText(s, 4);
                 e.user = columnText(s, 5);
                 e.jobId = columnInt(s, 6);
                 e.hosts = splitStrings(columnText(s, 7));
                 e.message = columnText(s, 8);
                 e.details = columnText(s, 9);
                 c.events.push_back(std::move(e));
                 return Status::Ok();
               }));
  std::reverse(c.events.begin(), c.events.end());

  ALLOT_RETURN_IF_ERROR(
      loadRows(db,
               "SELECT id, host, at_ms, by_name, from_state, to_state, reason, output "
               "FROM host_transitions ORDER BY id",
               "host transitions", [&](sqlite3_stmt* s) {
                 model::HostTransition t;
                 t.id = columnInt(s, 0);
                 t.host = columnText(s, 1);
                 t.at = columnInt(s, 2);
                 t.by = columnText(s, 3);
                 const std::string from = columnText(s, 4);
                 const std::string to = columnText(s, 5);
                 auto parsedFrom = model::parseAdminState(from);
                 auto parsedTo = model::parseAdminState(to);
                 if (!parsedFrom || !parsedTo) {
                   return Status::Internal("host transition " + std::to_string(t.id) +
                                           " has unknown state '" + (parsedFrom ? to : from) + "'");
                 }
                 t.from = *parsedFrom;
                 t.to = *parsedTo;
                 t.reason = columnText(s, 6);
                 t.output = columnText(s, 7);
                 c.hostTransitions.push_back(std::move(t));
                 return Status::Ok();
               }));

  ALLOT_RETURN_IF_ERROR(
      loadDocs(db, "upgrades", "id", "upgrade", &upgradeFromStoreDoc, c.upgrades));
  ALLOT_RETURN_IF_ERROR(loadDocs(db, "leases", "id", "lease", &leaseFromStoreDoc, c.leases));
  ALLOT_RETURN_IF_ERROR(
      loadDocs(db, "profiles", "name", "profile", &profileFromStoreDoc, c.profiles));
  return c;
}

std::string auditQuerySql(const AuditQuery& q) {
  // Only the filters given are in the statement, so that SQLite searches the index that fits
  // (audit_by_actor, audit_by_object) rather than reading the log from one end: with every
  // filter in it behind "?3 = '' OR actor = ?3", no index could serve, and a search for one actor
  // read every entry. The parameters keep their numbers whichever are left out. A search by time
  // alone still walks the ids from one end, which is also what pages that start at an id need.
  std::string sql =
      "SELECT id, at_ms, actor, actor_kind, address, action, object, status, request, before, "
      "after FROM audit WHERE ";
  // An object names one host, job or team: few entries, found by its index and then sorted. Its
  // range and the ids' would look alike to SQLite, which has no statistics here, and it would
  // pick the ids' (no sort) and read the log from one end; "+id" keeps the ids out of its choice.
  sql += q.object.empty() ? "id > ?5" : "+id > ?5";
  if (q.beforeId > 0) sql += q.object.empty() ? " AND id < ?6" : " AND +id < ?6";
  if (q.since > 0) sql += " AND at_ms >= ?1";
  if (q.until > 0) sql += " AND at_ms < ?2";
  if (!q.actor.empty()) sql += " AND actor = ?3";
  // The object or anything under it ("host:a" matches "host:a/gpu:0", not "host:a-b"), without
  // LIKE, whose wildcards names may contain. The range, ['host:a', 'host:a0'), holds both and is
  // what the index is searched by ('0' follows '/'); the exact test then drops "host:a-b".
  if (!q.object.empty()) {
    sql +=
        " AND object >= ?4 AND object < ?4 || '0' "
        "AND (object = ?4 OR substr(object, 1, length(?4) + 1) = ?4 || '/')";
  }
  sql += q.newestFirst ? " ORDER BY id DESC" : " ORDER BY id ASC";
  sql += " LIMIT ?7";
  return sql;
}

Result<std::vector<model::AuditEntry>> queryAudit(sqlite3* db, const AuditQuery& q) {
  const std::string sql = auditQuerySql(q);
  auto stmt = prepare(db, sql);
  if (!stmt.ok()) return stmt.status().withContext("failed to read the audit log");
  sqlite3_stmt* s = stmt->get();
  sqlite3_bind_int64(s, 1, q.since);
  sqlite3_bind_int64(s, 2, q.until);
  sqlite3_bind_text(s, 3, q.actor.data(), static_cast<int>(q.actor.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 4, q.object.data(), static_cast<int>(q.object.size()), SQLITE_STATIC);
  sqlite3_bind_int64(s, 5, q.afterId);
  sqlite3_bind_int64(s, 6, q.beforeId);
  sqlite3_bind_int64(s, 7, static_cast<int64_t>(q.limit));
  std::vector<model::AuditEntry> out;
  for (;;) {
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return lastError(db, rc, "failed to read the audit log");
    model::AuditEntry e;
    e.id = columnInt(s, 0);
    e.at = columnInt(s, 1);
    e.actor = columnText(s, 2);
    e.actorKind = columnText(s, 3);
    e.address = columnText(s, 4);
    e.action = columnText(s, 5);
    e.object = columnText(s, 6);
    e.status = static_cast<int>(columnInt(s, 7));
    e.request = columnText(s, 8);
    e.before = columnText(s, 9);
    e.after = columnText(s, 10);
    out.push_back(std::move(e));
  }
}

}  // namespace allot::store::sqlite
