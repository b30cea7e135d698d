#pragma once
// Row mapping for the SQLite store: the SQL behind each WriteOp and behind loadAll. This file and
// migrations/sqlite_migrations.cc are the only ones that know the table layout.

#include <sqlite3.h>

#include "common/status.h"
#include "store/sqlite/sqlite_handle.h"
#include "store/store.h"

namespace allot::store::sqlite {

// One prepared statement per op type, prepared once and reused for every batch. Belongs to the
// thread that owns the connection it was prepared on.
class WriteStatements {
 public:
  static Result<WriteStatements> prepareAll(sqlite3* db);

  // Applies one op inside the caller's transaction. Errors name the row: "failed to write job 42:
  // ...". A value that cannot be encoded (invalid UTF-8 in a string) is kInvalidArgument.
  Status apply(const WriteOp& op);

  // Transaction control. begin takes the write lock at once (BEGIN IMMEDIATE), so a busy database
  // fails here rather than halfway through a batch. rollback is a no-op outside a transaction.
  Status begin();
  Status commit();
  void rollback();

 private:
  Status put(const PutTeam& op);
  Status put(const PutUser& op);
  Status put(const PutToken& op);
  Status put(const DeleteToken& op);
  Status put(const PutProject& op);
  Status put(const PutJoinToken& op);
  Status put(const PutHost& op);
  Status put(const PutJob& op);
  Status put(const PutMeta& op);
  Status put(const AppendLedger& op);
  Status put(const AppendEvent& op);
  Status put(const AppendHostTransition& op);
  Status put(const PutUpgrade& op);
  Status put(const PutLease& op);
  Status put(const AppendAudit& op);
  Status put(const PutProfile& op);
  Status put(const DeleteProfile& op);

  StmtHandle team_;
  StmtHandle user_;
  StmtHandle token_;
  StmtHandle deleteToken_;
  StmtHandle project_;
  StmtHandle joinToken_;
  StmtHandle host_;
  StmtHandle job_;
  StmtHandle meta_;
  StmtHandle ledger_;
  StmtHandle event_;
  StmtHandle hostTransition_;
  StmtHandle upgrade_;
  StmtHandle lease_;
  StmtHandle audit_;
  StmtHandle profile_;
  StmtHandle deleteProfile_;
  StmtHandle begin_;
  StmtHandle commit_;
  StmtHandle rollback_;
};

// Reads every table; jobs come ordered by id, everything else by key. Not the audit log.
Result<Contents> loadContents(sqlite3* db);

// The statement queryAudit runs for `q`: only the filters set, parameters ?1 since, ?2 until, ?3
// actor, ?4 object, ?5 after id, ?6 before id, ?7 limit (tests read its query plan).
std::string auditQuerySql(const AuditQuery& q);
// Reads the audit entries `q` selects (Store::queryAudit).
Result<std::vector<model::AuditEntry>> queryAudit(sqlite3* db, const AuditQuery& q);

}  // namespace allot::store::sqlite
