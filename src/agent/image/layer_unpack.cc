#include "agent/image/layer_unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "agent/image/digest.h"

namespace allot::agent {
namespace {

constexpr size_t kReadChunk = 1 << 16;
constexpr const char* kWhiteoutPrefix = ".wh.";
constexpr const char* kOpaqueMarker = ".wh..wh..opq";

struct DigestFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

// The compressed stream, hashed as libarchive reads it. OpenSSL's SHA-256 (SHA-NI where the CPU
// has it: 1.6 GB/s here) rather than libsodium's portable one (0.26 GB/s), which took most of a
// big layer's unpacking time (docs/benchmarks.md, 2f).
struct HashingReader {
  int fd = -1;
  std::vector<unsigned char> buffer = std::vector<unsigned char>(kReadChunk);
  std::unique_ptr<EVP_MD_CTX, DigestFree> sha{EVP_MD_CTX_new()};
  int error = 0;

  ssize_t next(const void** out) {
    for (;;) {
      ssize_t n = ::read(fd, buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        error = errno;
        return -1;
      }
      EVP_DigestUpdate(sha.get(), buffer.data(), static_cast<size_t>(n));
      *out = buffer.data();
      return n;
    }
  }
  // What libarchive did not need to read (padding after the end-of-archive blocks) is part of
  // the blob all the same.
  bool drain() {
    const void* ignored;
    for (;;) {
      ssize_t n = next(&ignored);
      if (n < 0) return false;
      if (n == 0) return true;
    }
  }
  std::string hexDigest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    if (EVP_DigestFinal_ex(sha.get(), digest, &size) != 1) return "";
    return lowerHex(digest, size);
  }
};

ssize_t readCallback(struct archive*, void* client, const void** buffer) {
  return static_cast<HashingReader*>(client)->next(buffer);
}

struct ArchiveCloser {
  void operator()(struct archive* a) const { archive_read_free(a); }
};

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// A name from the layer as it may appear in a message: control bytes escaped, at most 200 bytes
// (it reaches users' terminals and logs).
std::string printable(const std::string& name) {
  std::string out;
  for (unsigned char c : name.substr(0, 200)) {
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  return name.size() > 200 ? out + "..." : out;
}

Status entryError(const std::string& name, const std::string& why) {
  return Status::InvalidArgument("layer entry \"" + printable(name) + "\": " + why);
}

// Unavailable only for a full disk (worth retrying once there is room); anything else a layer's
// entry makes fail is the layer's.
Status sysError(const std::string& name, const char* what, int err) {
  if (err == ENOSPC || err == EDQUOT)
    return Status::Unavailable("layer entry \"" + printable(name) + "\": " + what +
                               ": no space left on the image store's disk");
  return entryError(name, std::string(what) + ": " + std::strerror(err));
}

// A layer's name as components: "./a//b/" -> {a, b}. Refuses "..".
Result<std::vector<std::string>> components(const std::string& name) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= name.size()) {
    size_t j = name.find('/', i);
    if (j == std::string::npos) j = name.size();
    std::string part = name.substr(i, j - i);
    if (part == "..") return entryError(name, "a \"..\" component leaves the layer");
    if (!part.empty() && part != ".") out.push_back(std::move(part));
    i = j + 1;
  }
  return out;
}

// Unpacks entries relative to the layer's directory, keeping the last parent opened: a tar's
// entries come directory by directory.
class Unpacker {
 public:
  explicit Unpacker(int root) : root_(root) {}

  // The directory holding `parts` minus its last component, made as needed, opened without
  // following any symlink on the way.
  Result<int> parentOf(const std::string& name, const std::vector<std::string>& parts) {
    std::vector<std::string> dirs(parts.begin(), parts.end() - 1);
    if (dirs.empty()) return root_;
    if (cached_.get() >= 0 && dirs == cachedPath_) return cached_.get();
    Fd dir(::fcntl(root_, F_DUPFD_CLOEXEC, 0));
    if (dir.get() < 0) return sysError(name, "dup", errno);
    for (const std::string& d : dirs) {
      int next = ::openat(dir.get(), d.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next < 0 && errno == ENOENT) {
        // A parent the layer names only through its children (allowed by tar).
        if (::mkdirat(dir.get(), d.c_str(), 0755) != 0 && errno != EEXIST)
          return sysError(name, "mkdir", errno);
        next = ::openat(dir.get(), d.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      }
      if (next < 0 && (errno == ELOOP || errno == ENOTDIR))
        return entryError(name, "its path goes through \"" + printable(d) +
                                    "\", which is not a directory of the layer (a symlink?)");
      if (next < 0) return sysError(name, "open parent", errno);
      dir = Fd(next);
    }
    cached_ = std::move(dir);
    cachedPath_ = std::move(dirs);
    return cached_.get();
  }

  // Removes what the layer made at `base` before (tar: a later entry replaces an earlier one);
  // a directory stays for a directory.
  Status clear(int parent, const std::string& base, const std::string& name, bool forDirectory) {
    struct stat st {};
    if (::fstatat(parent, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return Status::Ok();
      return sysError(name, "stat", errno);
    }
    if (S_ISDIR(st.st_mode)) {
      if (forDirectory) return Status::Ok();
      if (::unlinkat(parent, base.c_str(), AT_REMOVEDIR) != 0)
        return entryError(name, "replaces a directory of the same layer that is not empty");
      invalidate();
      return Status::Ok();
    }
    if (::unlinkat(parent, base.c_str(), 0) != 0) return sysError(name, "unlink", errno);
    return Status::Ok();
  }

  void invalidate() {
    cached_.reset();
    cachedPath_.clear();
  }

 private:
  int root_;
  Fd cached_;
  std::vector<std::string> cachedPath_;
};

Status setOwnerModeTime(int parent, const std::string& base, const std::string& name,
                        struct archive_entry* e, bool symlink) {
  if (::fchownat(parent, base.c_str(), static_cast<uid_t>(archive_entry_uid(e)),
                 static_cast<gid_t>(archive_entry_gid(e)), AT_SYMLINK_NOFOLLOW) != 0)
    return sysError(name, "chown", errno);
  // (A symlink's mode means nothing on Linux, and fchmodat cannot leave it unfollowed.)
  // No set-ID bit survives (layer_unpack.h); sticky and the rest do.
  if (!symlink && ::fchmodat(parent, base.c_str(), archive_entry_perm(e) & 01777, 0) != 0)
    return sysError(name, "chmod", errno);
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = archive_entry_mtime(e);
  times[0].tv_nsec = times[1].tv_nsec = archive_entry_mtime_nsec(e);
  if (::utimensat(parent, base.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
    return sysError(name, "set times", errno);
  return Status::Ok();
}

Status writeContents(struct archive* a, int fd, const std::string& name, int64_t& bytes) {
  const void* block;
  size_t size;
  la_int64_t offset;
  for (;;) {
    int r = archive_read_data_block(a, &block, &size, &offset);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK) return entryError(name, archive_error_string(a));
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::pwrite(fd, static_cast<const char*>(block) + done, size - done,
                           static_cast<off_t>(offset) + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return sysError(name, "write", errno);
      done += static_cast<size_t>(n);
    }
    bytes += static_cast<int64_t>(size);
  }
  return Status::Ok();
}

}  // namespace

namespace {

Result<LayerStats> unpack(const std::string& archivePath, const std::string& sha256Hex,
                          int destDirFd, const LayerLimits& limits, LayerRefusal& refusal) {
  HashingReader reader;
  Fd file(::open(archivePath.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (file.get() < 0)
    return Status::NotFound("cannot open layer " + archivePath + ": " + std::strerror(errno));
  reader.fd = file.get();
  if (!reader.sha || EVP_DigestInit_ex(reader.sha.get(), EVP_sha256(), nullptr) != 1)
    return Status::Internal("cannot start a SHA-256 digest (OpenSSL)");

  std::unique_ptr<struct archive, ArchiveCloser> a(archive_read_new());
  // Only these: libarchive's other filters (lrzip, grzip, ...) may run external programs.
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_zstd(a.get());
  archive_read_support_filter_none(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open(a.get(), &reader, nullptr, readCallback, nullptr) != ARCHIVE_OK)
    return Status::InvalidArgument("layer " + archivePath +
                                   " is not a tar archive: " + archive_error_string(a.get()));

  LayerStats stats;
  Unpacker unpacker(destDirFd);
  struct archive_entry* e;
  for (;;) {
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      if (reader.error)
        return Status::Internal("reading layer: " + std::string(std::strerror(reader.error)));
      return Status::InvalidArgument("layer " + archivePath + ": " + archive_error_string(a.get()));
    }
    const char* rawName = archive_entry_pathname(e);
    if (rawName == nullptr) return Status::InvalidArgument("layer entry without a name");
    const std::string name = rawName;
    if (name.size() > limits.maxName)
      return Status::InvalidArgument("layer entry name over " + std::to_string(limits.maxName) +
                                     " bytes");
    if (++stats.seen > limits.maxEntries)
      return Status::InvalidArgument("layer has over " + std::to_string(limits.maxEntries) +
                                     " entries");
    auto parts = components(name);
    if (!parts.ok()) return parts.status();
    if (static_cast<int>(parts->size()) > limits.maxDepth)
      return entryError(name, "deeper than " + std::to_string(limits.maxDepth) + " directories");
    // A file's full size counts, holes of a sparse one included: what it may come to take.
    const int64_t size = std::max<int64_t>(0, archive_entry_size(e));
    if (size > limits.maxBytes - stats.declared)
      return Status::InvalidArgument("layer unpacks to over " +
                                     std::to_string(limits.maxBytes >> 20) + " MiB");
    stats.declared += size;
    if (parts->empty()) continue;  // the layer's root itself
    auto parentResult = unpacker.parentOf(name, *parts);
    if (!parentResult.ok()) return parentResult.status();
    const int parent = *parentResult;
    const std::string& base = parts->back();

    if (base == kOpaqueMarker) {
      // Its directory hides what lower layers have there.
      if (::fsetxattr(parent, "trusted.overlay.opaque", "y", 1, 0) != 0)
        return sysError(name, "mark opaque", errno);
      ++stats.entries;
      continue;
    }
    if (base.rfind(kWhiteoutPrefix, 0) == 0) {
      const std::string hidden = base.substr(std::strlen(kWhiteoutPrefix));
      if (hidden.empty() || hidden == "." || hidden == "..")
        return entryError(name, "a whiteout of nothing");
      if (Status st = unpacker.clear(parent, hidden, name, false); !st.ok()) return st;
      if (::mknodat(parent, hidden.c_str(), S_IFCHR | 0, makedev(0, 0)) != 0)
        return sysError(name, "make whiteout", errno);
      ++stats.entries;
      continue;
    }

    if (const char* target = archive_entry_hardlink(e)) {
      auto targetParts = components(target);
      if (!targetParts.ok()) return targetParts.status();
      if (targetParts->empty()) return entryError(name, "a hard link to the layer's root");
      // Opened on its own: the cache holds one parent, the entry's.
      Unpacker targetWalk(destDirFd);
      auto targetParent = targetWalk.parentOf(target, *targetParts);
      if (!targetParent.ok()) return targetParent.status();
      if (Status st = unpacker.clear(parent, base, name, false); !st.ok()) return st;
      if (::linkat(*targetParent, targetParts->back().c_str(), parent, base.c_str(), 0) != 0)
        return sysError(name, ("hard link to " + printable(target)).c_str(), errno);
      ++stats.entries;
      continue;
    }

    switch (archive_entry_filetype(e)) {
      case AE_IFDIR: {
        if (Status st = unpacker.clear(parent, base, name, true); !st.ok()) return st;
        if (::mkdirat(parent, base.c_str(), 0700) != 0 && errno != EEXIST)
          return sysError(name, "mkdir", errno);
        if (Status st = setOwnerModeTime(parent, base, name, e, false); !st.ok()) return st;
        break;
      }
      case AE_IFREG: {
        if (Status st = unpacker.clear(parent, base, name, false); !st.ok()) return st;
        Fd out(::openat(parent, base.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        0600));
        if (out.get() < 0) return sysError(name, "create", errno);
        if (Status st = writeContents(a.get(), out.get(), name, stats.bytes); !st.ok()) return st;
        if (::ftruncate(out.get(), static_cast<off_t>(archive_entry_size(e))) != 0)
          return sysError(name, "size", errno);
        if (Status st = setOwnerModeTime(parent, base, name, e, false); !st.ok()) return st;
        break;
      }
      case AE_IFLNK: {
        const char* to = archive_entry_symlink(e);
        if (to == nullptr) return entryError(name, "a symlink to nothing");
        if (Status st = unpacker.clear(parent, base, name, false); !st.ok()) return st;
        if (::symlinkat(to, parent, base.c_str()) != 0) return sysError(name, "symlink", errno);
        if (Status st = setOwnerModeTime(parent, base, name, e, true); !st.ok()) return st;
        break;
      }
      case AE_IFIFO: {
        if (Status st = unpacker.clear(parent, base, name, false); !st.ok()) return st;
        if (::mknodat(parent, base.c_str(), S_IFIFO | 0600, 0) != 0)
          return sysError(name, "mkfifo", errno);
        if (Status st = setOwnerModeTime(parent, base, name, e, false); !st.ok()) return st;
        break;
      }
      default:
        // Character and block devices, sockets: nothing a container's root file system needs.
        ++stats.skipped;
        continue;
    }
    ++stats.entries;
  }
  if (!reader.drain())
    return Status::Internal("reading layer: " + std::string(std::strerror(reader.error)));
  const std::string digest = reader.hexDigest();
  if (digest != sha256Hex) refusal = LayerRefusal::kDigest;
  if (digest != sha256Hex)
    return Status::InvalidArgument("layer digest mismatch: fetched as sha256:" + sha256Hex +
                                   ", its bytes hash to sha256:" + digest + "; refused");
  return stats;
}

}  // namespace

Result<LayerStats> unpackLayer(const std::string& archivePath, const std::string& sha256Hex,
                               int destDirFd, const LayerLimits& limits, LayerRefusal* refusal) {
  LayerRefusal why = LayerRefusal::kNone;
  auto r = unpack(archivePath, sha256Hex, destDirFd, limits, why);
  if (!r.ok() && why == LayerRefusal::kNone)
    why = r.status().code() == Code::kUnavailable ? LayerRefusal::kNoSpace : LayerRefusal::kInvalid;
  if (refusal) *refusal = why;
  return r;
}

}  // namespace allot::agent
