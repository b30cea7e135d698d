#include "common/gzip.h"

#include <zlib.h>

#include <cctype>
#include <new>
#include <stdexcept>

#include "common/ascii.h"

namespace allot {

std::string gzipCompress(std::string_view body, int level) {
  z_stream z{};
  // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::bad_alloc();
  std::string out;
  out.resize(deflateBound(&z, body.size()));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("gzip: deflate did not finish");
  return out;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

bool acceptsGzip(std::string_view header) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    const size_t semi = item.find(';');
    const std::string_view coding = trim(item.substr(0, semi));
    if (!asciiIEquals(coding, "gzip") && coding != "*") continue;
    if (semi == std::string_view::npos) return true;
    // "gzip;q=0" (or q=0.000) refuses it; any other weight accepts.
    std::string_view params = trim(item.substr(semi + 1));
    if (params.substr(0, 2) == "q=" || params.substr(0, 2) == "Q=") {
      std::string_view q = params.substr(2);
      bool zero = !q.empty() && q[0] == '0';
      for (char c : q.substr(zero ? 1 : 0)) zero = zero && (c == '.' || c == '0');
      return !zero;
    }
    return true;
  }
  return false;
}

}  // namespace allot
