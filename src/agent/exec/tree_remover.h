#pragma once
// TreeRemover: removes the directories a job leaves behind (its data, its scratch) without holding
// the agent's loop for as long as the job's owner likes. A job can leave millions of files, whose
// removal takes minutes; the loop that starts, watches and reports every job on the host must not
// wait that long.
//
// remove() removes up to `budget` entries on the caller's thread, which is all of a job's
// directories as jobs usually leave them. Whatever is left is renamed aside in the same parent,
// to a random kAsidePrefix name (renameAside), and a thread of the remover's own (started when
// first needed, at a lower priority) removes it from there. The path is free at once: a job of the
// same id can have it. The parent must be a directory only the agent may write (removeTree's rule),
// so nobody else can make or take those names.
//
// A remover destroyed (the agent stopping) stops between two slices of `budget` entries; what is
// left keeps its aside name, and the next agent's sweep() of the same parent takes it up.
//
// remove() and sweep() are for one thread (the agent's loop); the remover's thread only ever
// touches what was set aside.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "agent/exec/remove_tree.h"

namespace allot::agent {

class TreeRemover {
 public:
  // Entries one call of remove() removes at most on the caller's thread: a few tens of
  // milliseconds on ext4.
  static constexpr size_t kDefaultBudget = 4096;

  explicit TreeRemover(size_t budget = kDefaultBudget) : budget_(budget > 0 ? budget : 1) {}
  ~TreeRemover();
  TreeRemover(const TreeRemover&) = delete;
  TreeRemover& operator=(const TreeRemover&) = delete;

  struct Removal {
    // 0: path is gone (removed, or set aside); else an errno (see removeTree).
    int error = 0;
    // Part of it is still being removed in the background.
    bool setAside = false;
  };
  Removal remove(const std::string& path);

  // Removes, in the background, whatever an earlier agent set aside in dir and did not finish.
  void sweep(const std::string& dir);

  // Blocks until everything set aside so far is removed (or given up on). For tests and tools.
  void waitUntilIdle();

 private:
  void setAside(std::string path);
  void work();

  const size_t budget_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::string> queue_;  // the front is being removed while busy_
  bool busy_ = false;
  std::atomic<bool> stopping_{false};
  std::thread worker_;  // started by the first tree set aside
};

}  // namespace allot::agent
