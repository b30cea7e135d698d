#pragma once
// LogStore: each job's output as a file DATA_DIR/logs/<id>.log, written from the chunks agents
// send; rank r > 0 of a gang job has its own file, <id>.rank<r>.log. Chunks carry their byte
// offset, so a chunk sent twice (after a reconnect) is written once and a gap is refused: the agent
// resends from the size allotd reports in the desired state. Not thread-safe: the I/O thread owns
// it.

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
  Status append(int64_t job, int64_t offset, const std::string& data, int rank = 0);
  int64_t size(int64_t job, int rank = 0);
  // Up to maxBytes from offset; an absent log reads as empty.
  Result<std::string> read(int64_t job, int64_t offset, int64_t maxBytes, int rank = 0);

 private:
  using Key = std::pair<int64_t, int>;  // (job, rank)
  std::string pathOf(Key key) const;
  static std::string nameOf(Key key);
  std::string dir_;
  std::map<Key, int64_t> sizes_;  // cache of file sizes
};

}  // namespace allot::control
