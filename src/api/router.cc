#include "api/router.h"

namespace allot::api {
namespace {

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hexValue(s[i + 1]) >= 0 &&
               hexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(hexValue(s[i + 1]) * 16 + hexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<Route::Segment> segmentsOf(std::string_view pattern) {
  std::vector<Route::Segment> out;
  for (std::string_view seg : splitPath(pattern)) {
    const bool param = seg.size() > 2 && seg.front() == '{' && seg.back() == '}';
    out.push_back({std::string(param ? seg.substr(1, seg.size() - 2) : seg), param});
  }
  return out;
}

}  // namespace

PathSegments splitPath(std::string_view p) {
  PathSegments out;
  size_t i = 0;
  while (i < p.size()) {
    if (p[i] == '/') {
      ++i;
      continue;
    }
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    out.push_back(p.substr(i, j - i));
    i = j;
  }
  return out;
}

void Router::add(http::verb method, std::string pattern, Handler handler, bool authenticated) {
  auto segments = segmentsOf(pattern);
  routes_.push_back(
      {method, std::move(pattern), authenticated, std::move(handler), false, std::move(segments)});
}

void Router::addEventStream(std::string pattern) {
  // Never called: Server::serveHttp sees eventStream and streams instead.
  Handler unreachable = [](ApiRequest&) -> boost::asio::awaitable<ApiResponse> {
    co_return ApiResponse::error(Status::Internal("event stream served as a plain response"));
  };
  auto segments = segmentsOf(pattern);
  routes_.push_back({http::verb::get, std::move(pattern), true, std::move(unreachable), true,
                     std::move(segments)});
}

Router::Match Router::match(http::verb method, std::string_view path) const {
  Match m;
  const auto parts = splitPath(path);
  auto literalsMatch = [&parts](const Route& r) {
    if (r.segments.size() != parts.size()) return false;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!r.segments[i].param && r.segments[i].text != parts[i]) return false;
    }
    return true;
  };
  for (const auto& r : routes_) {
    if (!literalsMatch(r)) continue;
    if (r.method != method) {
      m.pathKnown = true;
      continue;
    }
    m.route = &r;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (r.segments[i].param) m.params[r.segments[i].text] = percentDecode(parts[i]);
    }
    return m;
  }
  return m;
}

std::map<std::string, std::string> parseQuery(std::string_view q) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  while (i < q.size()) {
    size_t amp = q.find('&', i);
    if (amp == std::string_view::npos) amp = q.size();
    auto kv = q.substr(i, amp - i);
    auto eq = kv.find('=');
    if (!kv.empty()) {
      if (eq == std::string_view::npos)
        out[percentDecode(kv)] = "";
      else
        out[percentDecode(kv.substr(0, eq))] = percentDecode(kv.substr(eq + 1));
    }
    i = amp + 1;
  }
  return out;
}

}  // namespace allot::api
