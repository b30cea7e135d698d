// libFuzzer target (clang's, from Debian): what allotd reads of a request before anyone is
// authenticated, in its own code rather than Boost.Beast's: the query string's percent-decoding,
// the path's segments, and the Host header that picks a session's origin (api/router.h,
// api/session_origin.h). Whatever the bytes, none may crash or read out of bounds; ASan and UBSan
// watch the memory, and the checks below hold what the routes rely on. Run by ctest for a
// bounded time (fuzz/CMakeLists.txt).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/router.h"
#include "api/session_origin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  (void)allot::api::parseQuery(text);
  // A segment is never empty and never holds the separator: a route's parameter cannot smuggle
  // a '/' into an object's name.
  for (std::string_view part : allot::api::splitPath(text)) {
    if (part.empty() || part.find('/') != std::string_view::npos) __builtin_trap();
  }

  for (std::string_view domain :
       {std::string_view("localhost"), std::string_view("allot.example")}) {
    const int64_t session = allot::api::sessionOfHost(text, domain);
    if (session < 0) __builtin_trap();
    if (session > 0) {
      // The origin allotd sends a browser to names the same session again.
      allot::api::SessionOrigins origins;
      origins.domain = std::string(domain);
      const std::string origin = allot::api::sessionOrigin(session, origins, text);
      const std::string_view host = std::string_view(origin).substr(origin.find("://") + 3);
      if (allot::api::sessionOfHost(host, domain) != session) __builtin_trap();
    }
    allot::api::SessionOrigins origins;
    origins.domain = std::string(domain);
    (void)allot::api::consoleOrigin(origins, text);
  }
  (void)allot::api::isLoopbackHost(text);
  return 0;
}
