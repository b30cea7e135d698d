#pragma once
// An http(s) URL taken apart by Boost.URL (RFC 3986): the one parser behind the CLI's and the
// agent's --server and idle webhooks. Each caller applies its own rules on top (which schemes,
// whether a path, query, user info or IPv6 host may appear) with its own messages.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace allot {

struct HttpUrl {
  std::string scheme;  // lower-cased, whatever it is
  std::string host;    // as written; an IPv6 literal without its brackets
  bool ipv6 = false;
  std::optional<uint16_t> port;  // when the URL names one
  std::string path;              // as written, "" when none
  std::string query;             // as written, without '?'
  bool hasQuery = false;
  bool hasFragment = false;
  bool hasUserinfo = false;
};

// Fails, saying why in a few words (never echoing the URL, which may carry a secret), on text
// that is not a URI with a host, or whose port is not 1..65535.
Result<HttpUrl> parseHttpUrl(std::string_view text);

}  // namespace allot
