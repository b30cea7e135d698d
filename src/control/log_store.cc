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

std::string LogStore::pathOf(int64_t job) const {
  return dir_ + "/" + std::to_string(job) + ".log";
}

int64_t LogStore::size(int64_t job) {
  auto it = sizes_.find(job);
  if (it != sizes_.end()) return it->second;
  struct stat st {};
  int64_t s = ::stat(pathOf(job).c_str(), &st) == 0 ? st.st_size : 0;
  sizes_[job] = s;
  return s;
}

Status LogStore::append(int64_t job, int64_t offset, const std::string& data) {
  int64_t have = size(job);
  if (offset > have) {
    return Status::FailedPrecondition("log chunk for job " + std::to_string(job) + " at offset " +
                                      std::to_string(offset) + " leaves a gap (have " +
                                      std::to_string(have) + " bytes)");
  }
  int64_t skip = have - offset;
  if (skip >= static_cast<int64_t>(data.size())) return Status::Ok();
  int fd = ::open(pathOf(job).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0)
    return Status::Unavailable("cannot open log of job " + std::to_string(job) + ": " +
                               std::strerror(errno));
  const char* p = data.data() + skip;
  size_t left = data.size() - skip;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      sizes_.erase(job);
      return Status::Unavailable("cannot write log of job " + std::to_string(job) + ": " +
                                 std::strerror(err));
    }
    p += n;
    left -= n;
  }
  ::close(fd);
  sizes_[job] = have + static_cast<int64_t>(data.size()) - skip;
  return Status::Ok();
}

Result<std::string> LogStore::read(int64_t job, int64_t offset, int64_t maxBytes) {
  std::string out;
  int fd = ::open(pathOf(job).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return out;
    return Status::Unavailable("cannot read log of job " + std::to_string(job) + ": " +
                               std::strerror(errno));
  }
  int64_t total = size(job);
  if (offset < total) {
    out.resize(static_cast<size_t>(std::min(maxBytes, total - offset)));
    ssize_t n = ::pread(fd, out.data(), out.size(), offset);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  return out;
}

}  // namespace allot::control
