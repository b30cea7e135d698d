#pragma once
// Unpacks one OCI image layer (a tar, gzip- or zstd-compressed or plain) into a directory of its
// own, in the form overlayfs stacks: a whiteout `.wh.NAME` becomes a 0:0 character device NAME,
// an opaque marker `.wh..wh..opq` the `trusted.overlay.opaque` attribute of its directory. Each
// layer is unpacked once per host and shared by every image and job that uses it
// (docs/environments.md).
//
// A layer is hostile input: any team may push any image. It is unpacked as root (image files
// keep their owners), so every entry is made relative to the layer's directory with openat()
// and friends, walking parents one component at a time with O_NOFOLLOW: an entry whose path goes
// through a symlink the layer planted (`etc -> /etc`, then `etc/passwd`) is refused, never
// followed, and so is a hard link to anything outside the layer. Names are relative: a leading
// "/" or "./" is dropped, a ".." component refuses the layer. Only what a root file system needs
// is made: directories, regular files, symlinks (never followed here), hard links and FIFOs.
// Device nodes and sockets are skipped (a container's /dev is a tmpfs of its own), none of
// the layer's extended attributes is kept (trusted.overlay.* would steer overlayfs), and no file
// keeps a set-user-ID or set-group-ID bit: inside, containers run with no new privileges, so the
// bits do nothing there, and a copy of such a file that the host could reach (a job's upper
// directory) must not give root to whoever runs it. Bounded: entries, bytes (sparse files count
// their full size), path depth and name length (LayerLimits); only gzip, zstd or no compression
// (libarchive's other filters may run external programs).
//
// The compressed bytes are hashed as they are read: a layer whose sha256 is not the digest it
// was fetched under is refused, whatever the registry or the disk did to it.

#include <cstdint>
#include <string>

#include "common/status.h"

namespace allot::agent {

struct LayerLimits {
  int64_t maxEntries = 1'000'000;
  int64_t maxBytes = int64_t{64} << 30;  // 64 GiB unpacked
  int maxDepth = 128;                    // path components
  size_t maxName = 4096;                 // bytes of a path
};

// Why a layer was refused, for the unpacker's exit status (what the store tells users).
enum class LayerRefusal { kNone, kDigest, kNoSpace, kInvalid };

struct LayerStats {
  int64_t entries = 0;   // made, whiteouts included
  int64_t bytes = 0;     // of file contents written
  int64_t skipped = 0;   // device nodes and sockets
  int64_t seen = 0;      // entries read
  int64_t declared = 0;  // bytes the entries' sizes add up to
};

// Unpacks the layer at `archivePath` into the empty directory `destDirFd`. `sha256Hex` is the
// digest the layer was fetched under (64 lower-case hex digits). On error the directory holds a
// part of the layer: the caller unpacks into a temporary name and removes it.
// `refusal`, when given, says which kind of error it was.
Result<LayerStats> unpackLayer(const std::string& archivePath, const std::string& sha256Hex,
                               int destDirFd, const LayerLimits& limits = {},
                               LayerRefusal* refusal = nullptr);

}  // namespace allot::agent
