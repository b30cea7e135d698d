#pragma once
// WorkerPool: a fixed set of threads running slow blocking work (password hashing, directory
// binds) off allotd's I/O thread, behind a bounded queue. When the queue is full, trySubmit
// refuses at once so callers can answer 503 instead of piling requests up behind the hashing.
// trySubmit may be called from any thread; work runs on the pool's threads, and whatever it
// must hand back it posts to its caller's executor itself. The destructor finishes queued work.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace allot::auth {

class WorkerPool {
 public:
  WorkerPool(size_t threads, size_t queueCapacity);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False (and `work` dropped) when `queueCapacity` items already wait.
  bool trySubmit(std::function<void()> work);

 private:
  void runWorker();

  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace allot::auth
