#include "api/static_files.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "api/router.h"
#include "common/gzip.h"

namespace allot::api {
namespace {

namespace fs = std::filesystem;

// The console loads nothing from elsewhere: scripts and connections only to allotd itself, and
// no framing (clickjacking). Inline styles stay allowed for the chart library's positioning.
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; "
    "form-action 'self'";

constexpr std::string_view kReservedPrefixes[] = {"/api/", "/metrics", "/healthz", "/sessions/"};

void addSecurityHeaders(ApiResponse& res) {
  res.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  res.headers.emplace_back("X-Content-Type-Options", "nosniff");
  res.headers.emplace_back("Referrer-Policy", "same-origin");
}

ApiResponse notFound(std::string text) {
  ApiResponse res{http::status::not_found, std::move(text) + "\n", "text/plain; charset=utf-8", {}};
  addSecurityHeaders(res);
  return res;
}

bool readWhole(const fs::path& p, std::string* out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = std::move(ss).str();
  return !in.bad();
}

bool isRegularFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

bool StaticFiles::isConsoleRequest(http::verb method, std::string_view path) {
  if (method != http::verb::get && method != http::verb::head) return false;
  for (std::string_view prefix : kReservedPrefixes) {
    if (path.substr(0, prefix.size()) == prefix) return false;
  }
  return true;
}

std::string_view contentTypeFor(std::string_view fileName) {
  auto dot = fileName.rfind('.');
  if (dot == std::string_view::npos) return "application/octet-stream";
  std::string_view ext = fileName.substr(dot + 1);
  static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {"html", "text/html; charset=utf-8"},
      {"js", "text/javascript; charset=utf-8"},
      {"mjs", "text/javascript; charset=utf-8"},
      {"css", "text/css; charset=utf-8"},
      {"svg", "image/svg+xml"},
      {"png", "image/png"},
      {"ico", "image/x-icon"},
      {"json", "application/json"},
      {"woff2", "font/woff2"},
      {"txt", "text/plain; charset=utf-8"},
      {"map", "application/json"},
  };
  for (const auto& [e, type] : kTypes) {
    if (ext == e) return type;
  }
  return "application/octet-stream";
}

ApiResponse StaticFiles::serve(std::string_view path, std::string_view acceptEncoding) const {
  if (!enabled()) return notFound("the web console is not built: run make");
  // Only plain names below the root: no parent or hidden segments, no NUL, no backslash. The
  // path is not percent-decoded, so "%2e%2e" names a file of that name, which does not exist.
  if (path.empty() || path.front() != '/' || path.find('\0') != std::string_view::npos ||
      path.find('\\') != std::string_view::npos)
    return notFound("not found");
  const auto segments = splitPath(path);
  for (std::string_view seg : segments) {
    if (seg.front() == '.') return notFound("not found");
  }
  fs::path file(root_);
  for (std::string_view seg : segments) file /= std::string(seg);
  std::string name = segments.empty() ? std::string() : std::string(segments.back());
  bool immutable = !segments.empty() && segments.front() == "assets" && segments.size() > 1;
  if (segments.empty() || !isRegularFile(file)) {
    // A route of the single-page app ("/queue", "/hosts/gpu-01") is index.html; a missing file
    // with an extension (a stale asset) is a plain 404.
    if (name.find('.') != std::string::npos) return notFound("not found");
    file = fs::path(root_) / "index.html";
    name = "index.html";
    immutable = false;
    if (!isRegularFile(file)) return notFound("the web console is not built: run make");
  }
  ApiResponse res;
  res.contentType = std::string(contentTypeFor(name));
  fs::path gz = file;
  gz += ".gz";
  const bool hasGz = isRegularFile(gz);
  if (hasGz) res.headers.emplace_back("Vary", "Accept-Encoding");
  if (hasGz && acceptsGzip(acceptEncoding) && readWhole(gz, &res.body)) {
    res.headers.emplace_back("Content-Encoding", "gzip");
  } else if (!readWhole(file, &res.body)) {
    return notFound("not found");
  }
  // Vite names assets by their content's hash: a changed file gets a new name.
  res.headers.emplace_back("Cache-Control",
                           immutable ? "public, max-age=31536000, immutable" : "no-cache");
  addSecurityHeaders(res);
  return res;
}

std::string defaultWebDir(const std::string& exePath) {
  std::error_code ec;
  fs::path dir = fs::path(exePath).parent_path();
  for (const fs::path& candidate :
       {dir / ".." / "share" / "allot" / "web", dir / ".." / ".." / "web" / "dist"}) {
    if (fs::is_directory(candidate, ec)) return fs::weakly_canonical(candidate, ec).string();
  }
  return "";
}

}  // namespace allot::api
