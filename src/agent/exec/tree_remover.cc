#include "agent/exec/tree_remover.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "agent/exec/remove_tree.h"

namespace allot::agent {

namespace fs = std::filesystem;

TreeRemover::~TreeRemover() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

TreeRemover::Removal TreeRemover::remove(const std::string& path) {
  const int err = removeTreeWithin(path, budget_);
  if (err != EINPROGRESS) return {err, false};
  const fs::path p(path);
  // The parent is one of the agent's roots (its jobs directory, the scratch root) as configured,
  // followed like the path itself was; the entry in it is renamed, never followed.
  const int parent = ::open(p.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent < 0) return {errno, false};
  std::string aside;
  const int moved = renameAside(parent, p.filename().string(), parent, &aside);
  ::close(parent);
  if (moved == ENOENT) return {0, false};
  if (moved != 0) return {moved, false};
  setAside((p.parent_path() / aside).string());
  return {0, true};
}

void TreeRemover::sweep(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const size_t prefixLength = std::strlen(kAsidePrefix);
  while (const dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, kAsidePrefix, prefixLength) == 0) setAside(dir + "/" + e->d_name);
  }
  ::closedir(d);
}

void TreeRemover::waitUntilIdle() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void TreeRemover::setAside(std::string path) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(path));
    if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  }
  wake_.notify_one();
}

void TreeRemover::work() {
  // Behind the agent's own work and the jobs': this only frees space. (Linux gives a thread its
  // own nice value.)
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const std::string path = queue_.front();
    busy_ = true;
    lock.unlock();
    int err = EINPROGRESS;
    while (err == EINPROGRESS && !stopping_) err = removeTreeWithin(path, budget_);
    // Given up on: the next agent's sweep tries again.
    if (err != 0 && err != EINPROGRESS)
      spdlog::warn("cannot remove {}: {}", path, std::strerror(err));
    lock.lock();
    busy_ = false;
    queue_.pop_front();
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace allot::agent
