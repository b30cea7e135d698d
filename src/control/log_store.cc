#include "control/log_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace allot::control {

LogStore::LogStore(std::string dir) : dir_(std::move(dir)) {}

Status LogStore::init() {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return Status::Unavailable("cannot create log directory " + dir_ + ": " + ec.message());
  return Status::Ok();
}

std::string LogStore::pathOf(Key key) const { return dir_ + "/" + nameOf(key) + ".log"; }

std::string LogStore::nameOf(Key key) {
  // Rank 0 keeps the name logs had before gangs, so those still read.
  std::string name = std::to_string(key.first);
  if (key.second != 0) name += ".rank" + std::to_string(key.second);
  return name;
}

int64_t LogStore::size(int64_t job, int rank) {
  const Key key{job, rank};
  auto it = sizes_.find(key);
  if (it != sizes_.end()) return it->second;
  struct stat st {};
  int64_t s = ::stat(pathOf(key).c_str(), &st) == 0 ? st.st_size : 0;
  sizes_[key] = s;
  return s;
}

Status LogStore::append(int64_t job, int64_t offset, const std::string& data, int rank) {
  const Key key{job, rank};
  const std::string what = "log of job " + nameOf(key);
  int64_t have = size(job, rank);
  if (offset > have) {
    return Status::FailedPrecondition("log chunk for job " + nameOf(key) + " at offset " +
                                      std::to_string(offset) + " leaves a gap (have " +
                                      std::to_string(have) + " bytes)");
  }
  int64_t skip = have - offset;
  if (skip >= static_cast<int64_t>(data.size())) return Status::Ok();
  int fd = ::open(pathOf(key).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return Status::Unavailable("cannot open " + what + ": " + std::strerror(errno));
  const char* p = data.data() + skip;
  size_t left = data.size() - skip;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      sizes_.erase(key);
      return Status::Unavailable("cannot write " + what + ": " + std::strerror(err));
    }
    p += n;
    left -= n;
  }
  ::close(fd);
  sizes_[key] = have + static_cast<int64_t>(data.size()) - skip;
  return Status::Ok();
}

Result<std::string> LogStore::read(int64_t job, int64_t offset, int64_t maxBytes, int rank) {
  const Key key{job, rank};
  std::string out;
  int fd = ::open(pathOf(key).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return out;
    return Status::Unavailable("cannot read log of job " + nameOf(key) + ": " +
                               std::strerror(errno));
  }
  int64_t total = size(job, rank);
  if (offset < total) {
    out.resize(static_cast<size_t>(std::min(maxBytes, total - offset)));
    ssize_t n = ::pread(fd, out.data(), out.size(), offset);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  return out;
}

}  // namespace allot::control
