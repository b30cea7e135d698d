#include "auth/worker_pool.h"

namespace allot::auth {

WorkerPool::WorkerPool(size_t threads, size_t queueCapacity) : capacity_(queueCapacity) {
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { runWorker(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

bool WorkerPool::trySubmit(std::function<void()> work) {
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= capacity_) return false;
    queue_.push_back(std::move(work));
  }
  wake_.notify_one();
  return true;
}

void WorkerPool::runWorker() {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to finish
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
  }
}

}  // namespace allot::auth
