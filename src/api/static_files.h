#pragma once
// StaticFiles: the web console's built files (web/dist) served by allotd at "/". Files are read
// from disk on each request: they are few and small, and a rebuilt console is served at once.
// Holds only its root directory; any thread may call it (allotd calls it on the I/O thread).

#include <string>
#include <string_view>

#include "api/http_types.h"

namespace allot::api {

class StaticFiles {
 public:
  // `root` "" means no console was built: every console path answers 404 saying so.
  explicit StaticFiles(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  bool enabled() const { return !root_.empty(); }

  // Whether a request that matched no API route is the console's: GET or HEAD, outside the
  // API, metrics, health and session paths.
  static bool isConsoleRequest(http::verb method, std::string_view path);

  // The reply for `path` (no query). A path naming no file and without an extension is a route
  // of the single-page app and gets index.html; `acceptEncoding` picks a .gz sibling when the
  // client takes gzip. Every reply carries the console's security headers.
  ApiResponse serve(std::string_view path, std::string_view acceptEncoding) const;

 private:
  std::string root_;
};

// The Content-Type for a file name by its extension; application/octet-stream when unknown.
std::string_view contentTypeFor(std::string_view fileName);

// Where an installed or built console lies relative to `exePath` (allotd's own binary): the
// first existing of <exe dir>/../share/allot/web and <exe dir>/../../web/dist; "" when none.
std::string defaultWebDir(const std::string& exePath);

}  // namespace allot::api
