#pragma once
// gzip for HTTP bodies (RFC 1952 through zlib). allotd compresses large API answers for clients
// that accept it: a 1,000-host cluster map is 1.69 MB of JSON and 78 KB gzipped.

#include <string>
#include <string_view>

namespace allot {

// `body` as a gzip member at zlib's `level` (1 fastest .. 9 smallest). Never fails for sane
// input sizes (throws std::bad_alloc like any allocation).
std::string gzipCompress(std::string_view body, int level = 1);

// Whether an Accept-Encoding header value allows gzip (a "gzip" or "*" token without q=0).
bool acceptsGzip(std::string_view acceptEncoding);

}  // namespace allot
