// allot-layer-unpack: unpacks one OCI image layer for the agent's image store, in a process of
// its own so that the agent's loop never waits on a decompression (layer_unpack.h).
//
//   allot-layer-unpack SHA256_HEX ARCHIVE DEST
//
// DEST must not exist; it is made (mode 0755) and filled. Prints one JSON line of counts on
// success; on failure a one-line reason on stderr and an exit status saying which kind: 3 the
// bytes do not hash to the digest, 4 the disk is full, 1 anything else (DEST is left for the
// caller to remove).

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "agent/image/layer_unpack.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: allot-layer-unpack SHA256_HEX ARCHIVE DEST\n");
    return 2;
  }
  // Files keep exactly the modes the layer gives them.
  ::umask(0);
  const std::string dest = argv[3];
  if (::mkdir(dest.c_str(), 0755) != 0) {
    std::fprintf(stderr, "allot-layer-unpack: cannot make %s: %s\n", dest.c_str(),
                 std::strerror(errno));
    return 1;
  }
  int dir = ::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) {
    std::fprintf(stderr, "allot-layer-unpack: cannot open %s: %s\n", dest.c_str(),
                 std::strerror(errno));
    return 1;
  }
  allot::agent::LayerRefusal refusal = allot::agent::LayerRefusal::kNone;
  auto stats = allot::agent::unpackLayer(argv[2], argv[1], dir, {}, &refusal);
  ::close(dir);
  if (!stats.ok()) {
    std::fprintf(stderr, "%s\n", stats.status().message().c_str());
    return refusal == allot::agent::LayerRefusal::kDigest    ? 3
           : refusal == allot::agent::LayerRefusal::kNoSpace ? 4
                                                             : 1;
  }
  std::printf("{\"entries\":%lld,\"bytes\":%lld,\"skipped\":%lld}\n",
              static_cast<long long>(stats->entries), static_cast<long long>(stats->bytes),
              static_cast<long long>(stats->skipped));
  return 0;
}
