#include "agent/exec/tree_remover.h"

#include <dirent.h>
#include <fcntl.h>  // AT_FDCWD
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>   // renameat2, RENAME_NOREPLACE
#include <cstdlib>  // arc4random
#include <cstring>

#include "agent/exec/remove_tree.h"

namespace allot::agent {
namespace {

std::string parentOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

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
  const std::string parent = parentOf(path);
  for (int tries = 0; tries < 16; ++tries) {
    const uint64_t tag = (uint64_t{::arc4random()} << 32) | ::arc4random();
    const std::string aside = parent + "/" + kAsidePrefix + std::to_string(tag);
    int done = ::renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, aside.c_str(), RENAME_NOREPLACE);
    // A file system without RENAME_NOREPLACE: a random name taken already is as unlikely.
    if (done != 0 && errno == EINVAL) done = ::rename(path.c_str(), aside.c_str());
    if (done == 0) {
      setAside(aside);
      return {0, true};
    }
    if (errno == ENOENT) return {0, false};
    if (errno != EEXIST && errno != ENOTEMPTY) return {errno, false};
  }
  return {EEXIST, false};
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
