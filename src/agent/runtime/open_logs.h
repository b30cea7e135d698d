#pragma once
// OpenLogs: a descriptor of each known job's output log, held from the first time its output is
// shipped until the job is forgotten or starts again. The agent looks at every job's log at
// every wake of its loop, which under a stream of short jobs is several times per job: opening
// the file by its path each time (a walk of the work dir's path, a new open file) was a tenth of
// the agent's work per job.
//
// A job's log is made by its start (JobDir::create); a job started again on this host (a requeue)
// gets a new file, so forget() must be called whenever a job starts as well as when it is
// forgotten. The logs are in jobs/<id>/, root's directory (the owner cannot put another file in
// its place), and opened O_NOFOLLOW all the same.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

namespace allot::agent {

class OpenLogs {
 public:
  OpenLogs() = default;
  ~OpenLogs() { clear(); }
  OpenLogs(const OpenLogs&) = delete;
  OpenLogs& operator=(const OpenLogs&) = delete;

  // The job's log, opened from path at the first call; -1 while it cannot be opened (it is
  // tried again at the next call).
  int fd(int64_t id, const std::string& path) {
    if (auto it = fds_.find(id); it != fds_.end()) return it->second;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) fds_.emplace(id, fd);
    return fd;
  }
  void forget(int64_t id) {
    if (auto it = fds_.find(id); it != fds_.end()) {
      ::close(it->second);
      fds_.erase(it);
    }
  }
  void clear() {
    for (const auto& [id, fd] : fds_) ::close(fd);
    fds_.clear();
  }
  size_t size() const { return fds_.size(); }

 private:
  std::map<int64_t, int> fds_;
};

// The file's size; -1 when fd is not open.
inline int64_t sizeOfFd(int fd) {
  struct stat st {};
  return fd >= 0 && ::fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// Up to max bytes of fd from offset; empty at its end. Sized by fstat first: a log that has not
// grown, which is most logs at most looks, costs no buffer.
inline std::string readAt(int fd, int64_t offset, int64_t max) {
  const int64_t size = sizeOfFd(fd);
  if (size <= offset) return {};
  std::string out(static_cast<size_t>(std::min(max, size - offset)), '\0');
  const ssize_t n = ::pread(fd, out.data(), out.size(), offset);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

}  // namespace allot::agent
