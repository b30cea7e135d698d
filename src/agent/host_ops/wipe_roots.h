#pragma once
// The roots a wipe empties (--scratch-dir, --home-dir, --team-dir) are checked at the agent's
// start against its work dir: emptying a root that holds the work dir would lose the agent's
// own state (its credential, its jobs' directories). The check compares where the paths really
// lead, so a trailing "/", "." or ".." segments, or a symlink cannot slip a root past it. The
// agent keeps the paths as given (made absolute and normal), so the wipe still refuses a root
// that is a symlink (agent/host_ops/wipe.h).

#include <string>

namespace allot::agent {

// `path` absolute, "." and ".." gone, no trailing "/" (but "/" itself); symlinks kept.
std::string normalPath(const std::string& path);

// True when emptying `root` would empty `dir` too: root leads to "/", to dir or to a directory
// above it, following the symlinks of the part of each path that exists.
bool holdsDir(const std::string& root, const std::string& dir);

}  // namespace allot::agent
