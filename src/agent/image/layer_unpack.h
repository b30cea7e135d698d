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
// Device nodes and sockets are skipped (a container's /dev is a tmpfs of its own), and none of
// the layer's extended attributes is kept (trusted.overlay.* would steer overlayfs).
//
// The compressed bytes are hashed as they are read: a layer whose sha256 is not the digest it
// was fetched under is refused, whatever the registry or the disk did to it.

#include <cstdint>
#include <string>

#include "common/status.h"

namespace allot::agent {

struct LayerStats {
  int64_t entries = 0;  // made, whiteouts included
  int64_t bytes = 0;    // of file contents written
  int64_t skipped = 0;  // device nodes and sockets
};

// Unpacks the layer at `archivePath` into the empty directory `destDirFd`. `sha256Hex` is the
// digest the layer was fetched under (64 lower-case hex digits). On error the directory holds a
// part of the layer: the caller unpacks into a temporary name and removes it.
Result<LayerStats> unpackLayer(const std::string& archivePath, const std::string& sha256Hex,
                               int destDirFd);

}  // namespace allot::agent
