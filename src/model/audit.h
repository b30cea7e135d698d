#pragma once
// AuditEntry: one change made through the API, as the append-only audit log keeps it
// (docs/audit.md). Entries are written by api/audit_capture.h and read back through
// store::Store::queryAudit; they are never loaded whole into memory.

#include <cstdint>
#include <string>

#include "common/clock.h"

namespace allot::model {

struct AuditEntry {
  int64_t id = 0;  // assigned by the store in commit order, from 1; 0 until then
  TimeMs at = 0;
  // Who: a user's name, "join:<join token id>" for a host joining, "host:<name>", or "system".
  std::string actor;
  std::string actorKind;  // "user", "join", "host" or "system"
  std::string address;    // the peer IP of the HTTP connection
  std::string action;     // method and route pattern: "POST /api/v1/hosts/{name}/drain"
  // What: "host:gpu-01", "job:42", "team:ml/project:vision" (one kind:id per path parameter),
  // or for a creation the created object's id from the reply; "" when none can be named.
  std::string object;
  int status = 0;  // the HTTP status of the reply
  // JSON texts with secrets redacted; "null" when there is none (no body; a creation's before).
  std::string request = "null";
  std::string before = "null";
  std::string after = "null";
};

}  // namespace allot::model
