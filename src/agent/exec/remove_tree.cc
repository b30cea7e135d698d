#include "agent/exec/remove_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>  // arc4random
#include <cstdio>  // renameat2, RENAME_NOREPLACE
#include <cstring>
#include <vector>

namespace allot::agent {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
constexpr size_t kBufferBytes = 32 * 1024;

// An entry read from a directory and not dealt with yet.
struct Entry {
  std::string name;
  unsigned char type;
};

// A directory being emptied: its descriptor, its name in the directory above, and what was read
// from it and not dealt with yet when a subdirectory was opened (the read buffer is reused for
// that one). Reading goes on from where the kernel's position is, never by seeking back: on tmpfs
// before Linux 6.6 a directory's offsets count the entries still there, so seeking to a saved
// offset after removing some skipped as many.
struct Level {
  int fd = -1;
  std::string name;
  std::vector<Entry> pending;  // in reverse order: the next one is the back
  bool readSince = false;      // entries were read since the last try at removing it
};

bool isDots(const char* name) {
  return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

// Moves parent/name into top, so that it is removed from there with fewer directories held
// open. 0 also when the entry is gone already.
int hoist(int parent, const std::string& name, int top) {
  const int err = renameAside(parent, name, top, nullptr);
  return err == ENOENT ? 0 : err;
}

// Removes the directory levels.back() holds, which looks empty: the top one by its path, any
// other by its name in the one above, whose descriptor is then the back. 0 once it is gone.
int removeLevel(std::vector<Level>& levels, const std::string& topPath) {
  if (levels.size() == 1) return ::rmdir(topPath.c_str()) == 0 || errno == ENOENT ? 0 : errno;
  const Level& dir = levels.back();
  const int parent = levels[levels.size() - 2].fd;
  if (::unlinkat(parent, dir.name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) return errno;
  ::close(dir.fd);
  levels.pop_back();
  return 0;
}

// Removes one entry of levels.back(), or opens it (a directory) as a new level. Returns 0 or an
// errno.
int removeEntry(std::vector<Level>& levels, const Entry& entry, bool& rescanTop) {
  const int dirFd = levels.back().fd;
  if (entry.type != DT_DIR) {
    if (::unlinkat(dirFd, entry.name.c_str(), 0) == 0 || errno == ENOENT) return 0;
    // A directory the file system did not type (DT_UNKNOWN): Linux's unlink says EISDIR.
    if (errno != EISDIR) return errno;
  }
  if (levels.size() >= kRemoveTreeMaxDepth) {
    if (int err = hoist(dirFd, entry.name, levels.front().fd); err != 0) return err;
    rescanTop = true;
    return 0;
  }
  const int fd = ::openat(dirFd, entry.name.c_str(), kDirFlags);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    // Swapped for a file or a symlink since it was read: that is unlinked, not followed.
    if ((errno == ENOTDIR || errno == ELOOP) &&
        (::unlinkat(dirFd, entry.name.c_str(), 0) == 0 || errno == ENOENT)) {
      return 0;
    }
    return errno;
  }
  levels.push_back({fd, entry.name, {}, false});
  return 0;
}

// Removes the directory levels[0] holds (at topPath), with all it holds, or stops with
// EINPROGRESS once it has removed or hoisted maxEntries entries. Entering a directory does not
// count (it is counted when it is removed): at most kRemoveTreeMaxDepth are entered before one
// is removed or hoisted, so each call makes progress, and a budget bounds its work. Leaves the
// descriptors it still holds in `levels` for the caller to close.
int removeAll(std::vector<Level>& levels, const std::string& topPath, size_t maxEntries) {
  std::vector<char> buffer(kBufferBytes);
  bool rescanTop = false;
  size_t removed = 0;
  for (;;) {
    Level& dir = levels.back();
    const bool top = levels.size() == 1;
    if (!dir.pending.empty()) {
      if (removed >= maxEntries) return EINPROGRESS;
      const Entry entry = std::move(dir.pending.back());
      dir.pending.pop_back();
      const size_t depth = levels.size();
      if (int err = removeEntry(levels, entry, rescanTop); err != 0) return err;
      if (levels.size() == depth) ++removed;  // else entered
      continue;
    }
    // Everything read is gone. For a directory that fit in one read (a job's usually do) that is
    // all of it: removing it now saves the read that would find the end. If more is left, the
    // removal fails and reading goes on.
    if (dir.readSince && !(top && rescanTop)) {
      dir.readSince = false;
      const int err = removeLevel(levels, topPath);
      if (err == 0 && top) return 0;
      if (err == 0) {
        ++removed;
        continue;
      }
      if (err != ENOTEMPTY && err != EEXIST) return err;
    }
    ssize_t n = ::getdents64(dir.fd, buffer.data(), buffer.size());
    // Removed meanwhile by another removal of the same tree (the wipe beside the executor's
    // background one): Linux reads a deleted directory as ENOENT. It is empty, then.
    if (n < 0 && errno == ENOENT) n = 0;
    if (n < 0) return errno;
    for (ssize_t at = 0; at < n;) {
      const auto* entry = reinterpret_cast<const struct dirent64*>(buffer.data() + at);
      at += entry->d_reclen;
      if (!isDots(entry->d_name)) dir.pending.push_back({entry->d_name, entry->d_type});
    }
    if (!dir.pending.empty()) {
      std::reverse(dir.pending.begin(), dir.pending.end());
      dir.readSince = true;
      continue;
    }
    if (n > 0) continue;  // only "." and ".."
    // The end. Hoisted subtrees may have landed behind where the read had got to. (Offset 0 is
    // the start on every file system.)
    if (top && rescanTop) {
      rescanTop = false;
      if (::lseek(dir.fd, 0, SEEK_SET) < 0) return errno;
      continue;
    }
    if (int err = removeLevel(levels, topPath); err != 0) return err;
    if (top) return 0;
    ++removed;
  }
}

}  // namespace

int renameAside(int fromDir, const std::string& name, int toDir, std::string* given) {
  for (int tries = 0; tries < 16; ++tries) {
    const uint64_t tag = (uint64_t{::arc4random()} << 32) | ::arc4random();
    const std::string to = kAsidePrefix + std::to_string(tag);
    int done = ::renameat2(fromDir, name.c_str(), toDir, to.c_str(), RENAME_NOREPLACE);
    // A file system without RENAME_NOREPLACE: a random name taken already is as unlikely.
    if (done != 0 && errno == EINVAL) done = ::renameat(fromDir, name.c_str(), toDir, to.c_str());
    if (done == 0) {
      if (given != nullptr) *given = to;
      return 0;
    }
    if (errno != EEXIST && errno != ENOTEMPTY) return errno;
  }
  return EEXIST;
}

int removeTree(const std::string& path) { return removeTreeWithin(path, SIZE_MAX); }

int removeTreeWithin(const std::string& path, size_t maxEntries) {
  const int top = ::open(path.c_str(), kDirFlags);
  if (top < 0) {
    if (errno == ENOENT) return 0;
    if (errno != ENOTDIR && errno != ELOOP) return errno;
    return ::unlink(path.c_str()) == 0 || errno == ENOENT ? 0 : errno;
  }
  std::vector<Level> levels;
  levels.reserve(kRemoveTreeMaxDepth);
  levels.push_back({top, "", {}, false});
  const int err = removeAll(levels, path, maxEntries);
  for (const Level& level : levels) ::close(level.fd);
  return err;
}

}  // namespace allot::agent
