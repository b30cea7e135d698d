#pragma once
// LogStore: each job's output as a file DATA_DIR/logs/<id>.log, written from the chunks agents
// send. Chunks carry their byte offset, so a chunk sent twice (after a reconnect) is written once
// and a gap is refused: the agent resends from the size allotd reports in the desired state.
// Not thread-safe: the I/O thread owns it.

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"

namespace allot::control {

class LogStore {
 public:
  explicit LogStore(std::string dir);
  Status init();

  // Appends the part of [offset, offset+data.size()) that is new.
  Status append(int64_t job, int64_t offset, const std::string& data);
  int64_t size(int64_t job);
  // Up to maxBytes from offset; an absent log reads as empty.
  Result<std::string> read(int64_t job, int64_t offset, int64_t maxBytes);

 private:
  std::string pathOf(int64_t job) const;
  std::string dir_;
  std::map<int64_t, int64_t> sizes_;  // cache of file sizes
};

}  // namespace allot::control
