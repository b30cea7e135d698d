#pragma once
// Router: method + path pattern ("/api/v1/jobs/{id}") to handler. The route table is also what
// the OpenAPI test compares against the published document.

#include <boost/container/small_vector.hpp>
#include <string>
#include <vector>

#include "api/http_types.h"

namespace allot::api {

struct Route {
  http::verb method;
  std::string pattern;
  bool authenticated = true;
  Handler handler;
  // Server-sent events: after authentication the server hands the connection to the event
  // stream (api/event_stream.h) instead of calling `handler` for one response.
  bool eventStream = false;
  // `pattern` split once by Router::add: every request is matched against every route, and
  // splitting each pattern per request was most of the matching's cost.
  struct Segment {
    std::string text;    // the literal, or the parameter's name without braces
    bool param = false;  // "{name}"
  };
  std::vector<Segment> segments = {};
};

class Router {
 public:
  void add(http::verb method, std::string pattern, Handler handler, bool authenticated = true);
  // An authenticated GET served as server-sent events (Route::eventStream).
  void addEventStream(std::string pattern);

  struct Match {
    const Route* route = nullptr;
    std::map<std::string, std::string> params;
    bool pathKnown = false;  // some route has this path, with another method (405)
  };
  Match match(http::verb method, std::string_view path) const;
  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;
};

// Splits "a=1&b=x%20y" into decoded pairs.
std::map<std::string, std::string> parseQuery(std::string_view query);
// The non-empty segments of a path or pattern: "/a//b/" -> {"a", "b"}. Held inline up to eight:
// every request splits its path several times (routing, audit), and an API path has at most six.
using PathSegments = boost::container::small_vector<std::string_view, 8>;
PathSegments splitPath(std::string_view path);

}  // namespace allot::api
