#pragma once
// LogStore: each job's output as a file DATA_DIR/logs/<id>.log, written from the chunks agents
// send; rank r > 0 of a gang job has its own file, <id>.rank<r>.log. Chunks carry their byte
// offset, so a chunk sent twice (after a reconnect) is written once and a gap is refused: the agent
// resends from the size allotd reports in the desired state (`received`). Not thread-safe: the I/O
// thread owns it.
//
// Bounded (issue 18, docs/access.md "Limits"): a log keeps at most about maxBytes of a job's
// output, its head and its tail. The first half goes to the .log file as it comes, followers see
// it live; after it, one line says that output is held back, and the newest half is kept in a
// ring beside it (<id>.tail: a header with the bytes received, then the ring). When the
// job ends, `seal` appends a line saying how many bytes were dropped and then the ring in order,
// so the .log file only ever grows and a follower reading from its last offset never misses a
// byte it was shown. And while the disk holding the logs has less than reserveBytes free, output
// bound for .log files is dropped, with one line saying so: logs stop first, so that the
// database, which holds the ledger, keeps room to commit. (A ring already started keeps its
// bounded size.)
//
// Beside each log, <id>.times indexes it by time: a record (received-at ms, .log offset) for the
// first chunk of each second that grew the file, so `logs --since T` starts at output received at
// or after T, to within a second, without a time on every line.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace allot::control {

struct LogStoreOptions {
  int64_t maxBytes = 64LL << 20;       // per job and rank; 0 = no cap (allotd --max-log-bytes)
  int64_t reserveBytes = 512LL << 20;  // free disk below which chunks are refused; 0 = none
};

class LogStore {
 public:
  explicit LogStore(std::string dir, LogStoreOptions options = {});
  Status init();

  // Appends the part of [offset, offset+data.size()) that is new. Refused when the log is sealed
  // (FailedPrecondition), for a negative offset, or for a gap before the log is capped: past the
  // head, a gap is output the agent skipped as the cap would drop it, counted as dropped.
  // `receivedAt` (ms since the epoch; 0 = not indexed) is when allotd got it, for offsetAt.
  Status append(int64_t job, int64_t offset, const std::string& data, int rank = 0,
                int64_t receivedAt = 0);
  // Where in the .log file output received at or after `t` begins (to within a second): 0 when
  // all of it was, size() when none was.
  int64_t offsetAt(int64_t job, int64_t t, int rank = 0);
  // Bytes of output received from agents: where the next chunk starts.
  int64_t received(int64_t job, int rank = 0);
  // Bytes a reader can read now (the .log file).
  int64_t size(int64_t job, int rank = 0);
  // Up to maxBytes from offset; an absent log reads as empty.
  Result<std::string> read(int64_t job, int64_t offset, int64_t maxBytes, int rank = 0);
  // The job ended: a capped log gets its note and tail; nothing more is appended. Idempotent.
  void seal(int64_t job, int rank = 0);
  // Capped logs not sealed yet, as (job, rank), found by init: allotd seals those of jobs that
  // ended while it was down.
  const std::vector<std::pair<int64_t, int>>& unsealedAtStart() const { return unsealedAtStart_; }

  const LogStoreOptions& options() const { return options_; }
  // What a capped log keeps of a job's output: its first headBytes() and its last tailBytes()
  // (both 0: no cap). Agents are told, and skip what would be dropped (model::LogKeep).
  int64_t headBytes() const { return options_.maxBytes / 2; }
  int64_t tailBytes() const { return options_.maxBytes - headBytes(); }

 private:
  using Key = std::pair<int64_t, int>;  // (job, rank)
  struct State {
    int64_t received = 0;  // bytes of the job's output the agent has delivered
    int64_t stored = 0;    // size of the .log file
    bool capped = false;   // past the head: a .tail file exists
    bool sealed = false;
    int64_t ringBase = 0;  // the output's byte at which the ring starts
    int64_t ringSize = 0;  // the ring's bytes, as made
    // The output's byte after the last gap (an agent's skip): the ring's older bytes are not the
    // output's tail. Kept in memory only: after a restart during a skipping flood, the tail shown
    // may hold bytes from before a skip.
    int64_t ringValidFrom = 0;
    bool droppingForDisk = false;  // the note is written; output is dropped until there is room
    int64_t lastIndexedAt = 0;     // the last .times record's time (this process's)
  };
  Status appendChunk(Key key, State& st, int64_t offset, const std::string& data);
  std::string timesPathOf(Key key) const;
  std::string pathOf(Key key) const;
  std::string tailPathOf(Key key) const;
  static std::string nameOf(Key key);
  State& stateOf(Key key);
  Status diskHasRoom();
  Status appendToLog(Key key, State& st, const char* p, size_t n);
  Status writeTail(Key key, State& st, const char* p, size_t n);
  Status writeTailHeader(int fd, const State& st);

  std::string dir_;
  LogStoreOptions options_;
  std::map<Key, State> states_;  // cache, filled from the files on first use
  std::vector<Key> unsealedAtStart_;
  int64_t lastDiskWarningNs_ = 0;
};

}  // namespace allot::control
