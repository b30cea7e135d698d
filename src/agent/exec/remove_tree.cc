#include "agent/exec/remove_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // renameat2, RENAME_NOREPLACE
#include <cstring>
#include <vector>

namespace allot::agent {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
constexpr size_t kBufferBytes = 32 * 1024;

// A directory being emptied: its descriptor, its name in the directory above, and where to read
// on once the subdirectory it is waiting for is gone (the buffer it was read into is reused
// meanwhile).
struct Level {
  int fd = -1;
  std::string name;
  off_t next = 0;
  bool seek = false;
};

bool isDots(const char* name) {
  return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

// Moves parent/name into top, under a name nothing there has, so that it is removed from there
// with fewer directories held open.
int hoist(int parent, const char* name, int top, unsigned& counter) {
  for (int tries = 0; tries < 1000; ++tries) {
    const std::string to = ".allot-removing-" + std::to_string(counter++);
    if (::renameat2(parent, name, top, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
    if (errno != EEXIST) return errno;
  }
  return EEXIST;
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

// Removes the directory levels[0] holds (at topPath), with all it holds. Leaves the descriptors
// it still holds in `levels` for the caller to close.
int removeAll(std::vector<Level>& levels, const std::string& topPath) {
  std::vector<char> buffer(kBufferBytes);
  unsigned hoisted = 0;
  bool rescanTop = false;
  while (!levels.empty()) {
    Level& dir = levels.back();
    if (dir.seek) {
      if (::lseek(dir.fd, dir.next, SEEK_SET) < 0) return errno;
      dir.seek = false;
    }
    const ssize_t n = ::getdents64(dir.fd, buffer.data(), buffer.size());
    if (n < 0) return errno;
    if (n == 0) {
      // Hoisted subtrees may have landed behind where the read had got to.
      if (levels.size() == 1 && rescanTop) {
        rescanTop = false;
        dir.next = 0;
        dir.seek = true;
        continue;
      }
      const bool top = levels.size() == 1;
      if (int err = removeLevel(levels, topPath); err != 0) return err;
      if (top) return 0;
      continue;
    }
    bool descended = false;
    for (ssize_t at = 0; at < n && !descended;) {
      const auto* entry = reinterpret_cast<const struct dirent64*>(buffer.data() + at);
      at += entry->d_reclen;
      const char* name = entry->d_name;
      if (isDots(name)) continue;
      if (entry->d_type != DT_DIR) {
        if (::unlinkat(dir.fd, name, 0) == 0 || errno == ENOENT) continue;
        // A directory the file system did not type (DT_UNKNOWN): Linux's unlink says EISDIR.
        if (errno != EISDIR) return errno;
      }
      if (levels.size() >= kRemoveTreeMaxDepth) {
        if (int err = hoist(dir.fd, name, levels.front().fd, hoisted); err != 0) return err;
        rescanTop = true;
        continue;
      }
      const int fd = ::openat(dir.fd, name, kDirFlags);
      if (fd < 0) {
        if (errno == ENOENT) continue;
        // Swapped for a file or a symlink since it was read: that is unlinked, not followed.
        if ((errno == ENOTDIR || errno == ELOOP) &&
            (::unlinkat(dir.fd, name, 0) == 0 || errno == ENOENT)) {
          continue;
        }
        return errno;
      }
      dir.next = entry->d_off;
      dir.seek = true;
      levels.push_back({fd, name});  // `dir` is not used past this point
      descended = true;
    }
    if (descended) continue;
    // Everything read is gone. For a directory that fit in one read (a job's usually do) that
    // is all of it: removing it now saves the read that would find the end. If more is left,
    // the removal fails and reading goes on.
    const bool top = levels.size() == 1;
    if (top && rescanTop) continue;
    const int err = removeLevel(levels, topPath);
    if (err == 0 && top) return 0;
    if (err != 0 && err != ENOTEMPTY && err != EEXIST) return err;
  }
  return 0;
}

}  // namespace

int removeTree(const std::string& path) {
  const int top = ::open(path.c_str(), kDirFlags);
  if (top < 0) {
    if (errno == ENOENT) return 0;
    if (errno != ENOTDIR && errno != ELOOP) return errno;
    return ::unlink(path.c_str()) == 0 || errno == ENOENT ? 0 : errno;
  }
  std::vector<Level> levels;
  levels.reserve(kRemoveTreeMaxDepth);
  levels.push_back({top, ""});
  const int err = removeAll(levels, path);
  for (const Level& level : levels) ::close(level.fd);
  return err;
}

}  // namespace allot::agent
