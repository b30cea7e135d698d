#include "control/log_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace allot::control {
namespace {

// The .tail file: received, sealed, ring base, ring size (int64 each), then the ring. The ring's
// size is the one it was made with: a later --max-log-bytes does not move its bytes.
constexpr int64_t kTailHeader = 32;

std::string mib(int64_t bytes) {
  if (bytes < (1 << 20)) return std::to_string(bytes) + " bytes";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

Status writeAll(int fd, const char* p, size_t n, int64_t at, const std::string& what) {
  while (n > 0) {
    ssize_t w = at < 0 ? ::write(fd, p, n) : ::pwrite(fd, p, n, at);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::Unavailable("cannot write " + what + ": " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
    if (at >= 0) at += w;
  }
  return Status::Ok();
}

bool readAll(int fd, char* p, size_t n, int64_t at) {
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    at += r;
  }
  return true;
}

// Parses "<job>.tail" or "<job>.rank<r>.tail".
bool parseTailName(const std::string& name, int64_t& job, int& rank) {
  constexpr std::string_view kSuffix = ".tail";
  if (name.size() <= kSuffix.size() ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return false;
  std::string stem = name.substr(0, name.size() - kSuffix.size());
  rank = 0;
  if (auto dot = stem.find(".rank"); dot != std::string::npos) {
    try {
      rank = std::stoi(stem.substr(dot + 5));
    } catch (...) {
      return false;
    }
    stem = stem.substr(0, dot);
  }
  try {
    size_t used = 0;
    job = std::stoll(stem, &used);
    return used == stem.size() && job > 0;
  } catch (...) {
    return false;
  }
}

// Copies `length` bytes at `from` in `in` to `to` in `out` (copy_file_range refuses O_APPEND).
Status copyRange(int in, int64_t from, int out, int64_t to, int64_t length) {
  loff_t at = from, outAt = to;
  while (length > 0) {
    ssize_t n = ::copy_file_range(in, &at, out, &outAt, static_cast<size_t>(length), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
      // Not on this file system (or kernel): through a small buffer instead.
      std::string buf(static_cast<size_t>(std::min<int64_t>(length, 1 << 20)), '\0');
      if (!readAll(in, buf.data(), buf.size(), at))
        return Status::Unavailable("cannot read the log's tail");
      ALLOT_RETURN_IF_ERROR(writeAll(out, buf.data(), buf.size(), outAt, "log"));
      n = static_cast<ssize_t>(buf.size());
      at += n;
      outAt += n;
    } else if (n <= 0) {
      return Status::Unavailable(std::string("cannot copy the log's tail: ") +
                                 (n < 0 ? std::strerror(errno) : "short file"));
    }
    length -= n;
  }
  return Status::Ok();
}

}  // namespace

LogStore::LogStore(std::string dir, LogStoreOptions options)
    : dir_(std::move(dir)), options_(options) {}

Status LogStore::init() {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return Status::Unavailable("cannot create log directory " + dir_ + ": " + ec.message());
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    int64_t job = 0;
    int rank = 0;
    if (!parseTailName(entry.path().filename().string(), job, rank)) continue;
    if (!stateOf({job, rank}).sealed) unsealedAtStart_.emplace_back(job, rank);
  }
  return Status::Ok();
}

std::string LogStore::pathOf(Key key) const { return dir_ + "/" + nameOf(key) + ".log"; }
std::string LogStore::tailPathOf(Key key) const { return dir_ + "/" + nameOf(key) + ".tail"; }
std::string LogStore::timesPathOf(Key key) const { return dir_ + "/" + nameOf(key) + ".times"; }

std::string LogStore::nameOf(Key key) {
  // Rank 0 keeps the name logs had before gangs, so those still read.
  std::string name = std::to_string(key.first);
  if (key.second != 0) name += ".rank" + std::to_string(key.second);
  return name;
}

LogStore::State& LogStore::stateOf(Key key) {
  auto it = states_.find(key);
  if (it != states_.end()) return it->second;
  State st;
  struct stat s {};
  if (::stat(pathOf(key).c_str(), &s) == 0) st.stored = s.st_size;
  st.received = st.stored;
  if (int fd = ::open(tailPathOf(key).c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    int64_t header[4] = {0, 0, 0, 0};
    // The header alone says how much was received (the .log file also holds the notes).
    if (readAll(fd, reinterpret_cast<char*>(header), sizeof header, 0) && header[2] > 0 &&
        header[3] > 0 && header[0] >= header[2]) {
      st.capped = true;
      st.received = header[0];
      st.sealed = header[1] != 0;
      st.ringBase = header[2];
      st.ringSize = header[3];
    } else {
      spdlog::warn("log store: the tail of job {} is unreadable; its log goes on without it",
                   nameOf(key));
    }
    ::close(fd);
  }
  return states_.emplace(key, st).first->second;
}

int64_t LogStore::received(int64_t job, int rank) { return stateOf({job, rank}).received; }
int64_t LogStore::size(int64_t job, int rank) { return stateOf({job, rank}).stored; }

Status LogStore::diskHasRoom() {
  if (options_.reserveBytes <= 0) return Status::Ok();
  struct statvfs vfs {};
  if (::statvfs(dir_.c_str(), &vfs) != 0) return Status::Ok();  // cannot tell: let write decide
  const int64_t free = static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
  if (free >= options_.reserveBytes) return Status::Ok();
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  if (now - lastDiskWarningNs_ > 60'000'000'000LL) {
    lastDiskWarningNs_ = now;
    spdlog::error(
        "log store: {} free on the disk of {}, under the reserve of {}: job output is not stored "
        "until space is freed (the database keeps committing)",
        mib(free), dir_, mib(options_.reserveBytes));
  }
  return Status::Unavailable("the disk holding job logs had " + mib(free) +
                             " free, under allotd's reserve of " + mib(options_.reserveBytes));
}

Status LogStore::appendToLog(Key key, State& st, const char* p, size_t n) {
  int fd = ::open(pathOf(key).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0)
    return Status::Unavailable("cannot open log of job " + nameOf(key) + ": " +
                               std::strerror(errno));
  Status w = writeAll(fd, p, n, -1, "log of job " + nameOf(key));
  ::close(fd);
  if (!w.ok()) {
    states_.erase(key);  // the file's size is unknown now: read it again
    return w;
  }
  st.stored += static_cast<int64_t>(n);
  return Status::Ok();
}

Status LogStore::writeTailHeader(int fd, const State& st) {
  const int64_t header[4] = {st.received, st.sealed ? 1 : 0, st.ringBase, st.ringSize};
  return writeAll(fd, reinterpret_cast<const char*>(header), sizeof header, 0, "log tail header");
}

Status LogStore::writeTail(Key key, State& st, const char* p, size_t n) {
  int fd = ::open(tailPathOf(key).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0)
    return Status::Unavailable("cannot open log tail of job " + nameOf(key) + ": " +
                               std::strerror(errno));
  const int64_t ring = st.ringSize;
  // Only the newest `ring` bytes of this piece can survive in the ring.
  if (static_cast<int64_t>(n) > ring) {
    st.received += static_cast<int64_t>(n) - ring;
    p += n - static_cast<size_t>(ring);
    n = static_cast<size_t>(ring);
  }
  Status w = Status::Ok();
  while (n > 0 && w.ok()) {
    const int64_t at = (st.received - st.ringBase) % ring;
    const size_t piece = std::min<size_t>(n, static_cast<size_t>(ring - at));
    w = writeAll(fd, p, piece, kTailHeader + at, "log tail of job " + nameOf(key));
    st.received += static_cast<int64_t>(piece);
    p += piece;
    n -= piece;
  }
  // Data before header: a crash between the two leaves the old count, and the agent resends.
  if (w.ok()) w = writeTailHeader(fd, st);
  ::close(fd);
  if (!w.ok()) states_.erase(key);
  return w;
}

Status LogStore::append(int64_t job, int64_t offset, const std::string& data, int rank,
                        int64_t receivedAt) {
  const Key key{job, rank};
  const int64_t before = stateOf(key).stored;
  Status appended = appendChunk(key, stateOf(key), offset, data);
  // Looked up again: a failed write drops the job's state (appendToLog, writeTail).
  auto found = states_.find(key);
  if (found == states_.end()) return appended;
  State& st = found->second;
  if (receivedAt > 0 && st.stored > before && receivedAt - st.lastIndexedAt >= 1000) {
    const int64_t record[2] = {receivedAt, before};
    int fd = ::open(timesPathOf(key).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    // An index only: the output itself is in the .log file, so a record lost costs precision.
    if (fd >= 0 && ::write(fd, record, sizeof record) == static_cast<ssize_t>(sizeof record))
      st.lastIndexedAt = receivedAt;
    if (fd >= 0) ::close(fd);
  }
  return appended;
}

int64_t LogStore::offsetAt(int64_t job, int64_t t, int rank) {
  const Key key{job, rank};
  const int64_t total = size(job, rank);
  int fd = ::open(timesPathOf(key).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return t <= 0 ? 0 : total;
  struct stat sb {};
  const int64_t records = ::fstat(fd, &sb) == 0 ? sb.st_size / 16 : 0;
  auto at = [&](int64_t i, int64_t out[2]) { return ::pread(fd, out, 16, i * 16) == 16; };
  // Records are in the order chunks came; times only grow but for a clock stepped back, which
  // at worst starts the answer a little early.
  int64_t lo = 0, hi = records;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    int64_t r[2];
    if (!at(mid, r)) break;
    if (r[0] < t) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  // The record before may stand for chunks up to a second after it, some of them after t: better
  // a line early than one missed.
  int64_t r[2];
  if (lo > 0 && at(lo - 1, r) && r[0] > t - 1000) --lo;
  const int64_t offset = lo < records && at(lo, r) ? std::clamp<int64_t>(r[1], 0, total) : total;
  ::close(fd);
  return offset;
}

Status LogStore::appendChunk(Key key, State& st, int64_t offset, const std::string& data) {
  if (offset < 0)
    return Status::InvalidArgument("log chunk for job " + nameOf(key) + " at a negative offset");
  if (st.sealed)
    return Status::FailedPrecondition("the log of job " + nameOf(key) +
                                      " is sealed: the job has ended");
  if (offset > st.received && !st.capped) {
    return Status::FailedPrecondition("log chunk for job " + nameOf(key) + " at offset " +
                                      std::to_string(offset) + " leaves a gap (have " +
                                      std::to_string(st.received) + " bytes)");
  }
  if (offset > st.received) {
    // Past the head the agent skips output the cap would drop (model::LogKeep): the skipped bytes
    // count as dropped, and what the ring held before them is no longer the output's tail.
    st.received = offset;
    st.ringValidFrom = offset;
  }
  const int64_t skip = st.received - offset;
  if (skip >= static_cast<int64_t>(data.size())) return Status::Ok();
  const char* p = data.data() + skip;
  size_t n = data.size() - static_cast<size_t>(skip);
  if (!st.capped) {
    // Into the .log file: the head, or all of it without a cap.
    const int64_t headRoom = options_.maxBytes <= 0 ? INT64_MAX : headBytes() - st.received;
    const size_t direct = static_cast<size_t>(std::clamp<int64_t>(headRoom, 0, n));
    if (direct > 0) {
      if (Status room = diskHasRoom(); !room.ok()) {
        // Dropped, and said once: the agent's offsets stay in step, so output resumes in place
        // once there is room again.
        if (!st.droppingForDisk) {
          const std::string note = "\n[allot: output dropped from here: " + room.message() + "]\n";
          (void)appendToLog(key, st, note.data(), note.size());
          st.droppingForDisk = true;
        }
      } else {
        st.droppingForDisk = false;
        ALLOT_RETURN_IF_ERROR(appendToLog(key, st, p, direct));
      }
      st.received += static_cast<int64_t>(direct);
      p += direct;
      n -= direct;
    }
    if (n == 0) return Status::Ok();
    const std::string note = "\n[allot: this log keeps the first " + mib(headBytes()) +
                             " and the last " + mib(tailBytes()) +
                             " of the job's output (allotd --max-log-bytes); the rest of it is "
                             "shown when the job ends]\n";
    ALLOT_RETURN_IF_ERROR(appendToLog(key, st, note.data(), note.size()));
    st.capped = true;
    st.ringBase = st.received;
    st.ringSize = tailBytes();
    // The header first: a crash before the ring's first bytes leaves a ring that says it is empty.
    int fd = ::open(tailPathOf(key).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0)
      return Status::Unavailable("cannot create the log tail of job " + nameOf(key) + ": " +
                                 std::strerror(errno));
    Status h = writeTailHeader(fd, st);
    ::close(fd);
    ALLOT_RETURN_IF_ERROR(h);
  }
  return writeTail(key, st, p, n);
}

void LogStore::seal(int64_t job, int rank) {
  const Key key{job, rank};
  State& st = stateOf(key);
  if (st.sealed || !st.capped) {
    // An uncapped log needs nothing; mark it so a late chunk is refused.
    st.sealed = true;
    return;
  }
  const int64_t ring = st.ringSize;
  const int64_t past = st.received - st.ringBase;  // bytes after the head
  int64_t kept = std::min({past, ring, st.received - std::max(st.ringBase, st.ringValidFrom)});
  int tail = ::open(tailPathOf(key).c_str(), O_RDWR | O_CLOEXEC);
  if (tail < 0) {
    spdlog::warn("log store: cannot open the tail of job {}: {}", nameOf(key),
                 std::strerror(errno));
    return;
  }
  std::string note = "\n[allot: " + std::to_string(past - kept) +
                     " bytes of output were dropped here; the last " + std::to_string(kept) +
                     " bytes follow]\n";
  if (Status room = diskHasRoom(); !room.ok()) {
    note = "\n[allot: the last " + std::to_string(kept) +
           " bytes of output are not kept: " + room.message() + "]\n";
    kept = 0;
  }
  Status w = appendToLog(key, st, note.data(), note.size());
  // The oldest kept byte sits right after the newest when the ring has wrapped. The kernel
  // copies the ring into the log (copy_file_range): tens of MiB never pass through allotd's
  // memory, and the I/O thread is held only as long as the page cache takes.
  const int64_t start = (past - kept) % ring;
  const int64_t first = std::min(kept, ring - start);
  int log = w.ok() ? ::open(pathOf(key).c_str(), O_WRONLY | O_CLOEXEC) : -1;
  if (w.ok() && log < 0)
    w = Status::Unavailable(std::string("cannot open it: ") + std::strerror(errno));
  for (auto [from, length] :
       {std::pair{kTailHeader + start, first}, std::pair{kTailHeader, kept - first}}) {
    if (!w.ok()) break;
    if (Status c = copyRange(tail, from, log, st.stored, length); !c.ok()) w = c;
    if (w.ok()) st.stored += length;
  }
  if (log >= 0) ::close(log);
  if (w.ok()) {
    st.sealed = true;
    w = writeTailHeader(tail, st);
    if (w.ok() && ::ftruncate(tail, kTailHeader) != 0) w = Status::Unavailable("truncate");
  }
  ::close(tail);
  if (!w.ok()) {
    states_.erase(key);  // sizes unknown now: read them again
    spdlog::warn("log store: cannot seal the log of job {}: {}", nameOf(key), w.message());
  }
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
  if (offset >= 0 && offset < total) {
    out.resize(static_cast<size_t>(std::min(maxBytes, total - offset)));
    ssize_t n = ::pread(fd, out.data(), out.size(), offset);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  return out;
}

}  // namespace allot::control
