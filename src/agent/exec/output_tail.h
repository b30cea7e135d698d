#pragma once
// The tail of a run's output, as hook and host-task results carry it: the last `cap` bytes of what
// it is given, after a note of how many earlier bytes were dropped. Trimmed only once the buffer
// is twice the cap, so that a stream of small pieces does not move the buffer on every one.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace allot::agent {

class OutputTail {
 public:
  explicit OutputTail(size_t cap) : cap_(cap) {}

  void add(std::string_view data) {
    buf_.append(data);
    if (buf_.size() > 2 * cap_) trim();
  }

  // What was kept, after the note when anything was dropped. Called once, at the end.
  std::string take() {
    trim();
    if (dropped_ == 0) return std::move(buf_);
    return "[... " + std::to_string(dropped_) + " earlier bytes not kept ...]\n" + buf_;
  }

 private:
  void trim() {
    if (buf_.size() <= cap_) return;
    dropped_ += buf_.size() - cap_;
    buf_.erase(0, buf_.size() - cap_);
  }

  size_t cap_;
  size_t dropped_ = 0;
  std::string buf_;
};

}  // namespace allot::agent
