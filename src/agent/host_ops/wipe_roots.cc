#include "agent/host_ops/wipe_roots.h"

#include <filesystem>
#include <system_error>

namespace allot::agent {

namespace {

std::string withoutTrailingSlash(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// Where `path` really leads: symlinks of the part that exists resolved.
std::string resolvedPath(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  if (ec) return normalPath(path);
  return withoutTrailingSlash(p.string());
}

}  // namespace

std::string normalPath(const std::string& path) {
  return withoutTrailingSlash(std::filesystem::absolute(path).lexically_normal().string());
}

bool holdsDir(const std::string& root, const std::string& dir) {
  const std::string r = resolvedPath(root), d = resolvedPath(dir);
  return r == "/" || (d + "/").rfind(r + "/", 0) == 0;
}

}  // namespace allot::agent
