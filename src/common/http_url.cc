#include "common/http_url.h"

#include <algorithm>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <cctype>
#include <charconv>

namespace allot {

Result<HttpUrl> parseHttpUrl(std::string_view text) {
  auto parsed = boost::urls::parse_uri(text);
  if (!parsed) return Status::InvalidArgument("not a URL (" + parsed.error().message() + ")");
  const boost::urls::url_view& u = *parsed;
  HttpUrl out;
  out.scheme = std::string(u.scheme());
  std::transform(out.scheme.begin(), out.scheme.end(), out.scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  out.ipv6 = u.host_type() == boost::urls::host_type::ipv6;
  out.host = std::string(u.encoded_host_address());
  if (!u.has_authority() || out.host.empty()) return Status::InvalidArgument("no host");
  out.hasUserinfo = u.has_userinfo();
  if (u.has_port() && !u.port().empty()) {
    const std::string_view p = u.port();
    int v = 0;
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (ec != std::errc() || end != p.data() + p.size() || v < 1 || v > 65535)
      return Status::InvalidArgument("port must be a number from 1 to 65535");
    out.port = static_cast<uint16_t>(v);
  }
  out.path = std::string(u.encoded_path());
  // Boost.URL reads "http://x:abc" as an empty port and a path "abc"; after a host, a path
  // starts with '/'.
  if (!out.path.empty() && out.path.front() != '/')
    return Status::InvalidArgument(u.has_port() ? "port must be a number from 1 to 65535"
                                                : "not a URL (junk after the host)");
  out.hasQuery = u.has_query();
  out.query = std::string(u.encoded_query());
  out.hasFragment = u.has_fragment();
  return out;
}

}  // namespace allot
