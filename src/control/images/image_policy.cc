#include "control/images/image_policy.h"

#include <algorithm>
#include <set>

namespace allot::control {
namespace {

// Where a reference may go on after a prefix that does not end in '/': the repository's next
// component, its tag, or its digest.
bool boundaryAt(const std::string& ref, size_t at) {
  return at == ref.size() || ref[at] == '/' || ref[at] == ':' || ref[at] == '@';
}

bool referenceChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_' || c == ':' || c == '/';
}

}  // namespace

bool imageAllowed(const std::vector<std::string>& allow, const std::string& ref) {
  return std::any_of(allow.begin(), allow.end(), [&](const std::string& prefix) {
    if (prefix.empty() || ref.compare(0, prefix.size(), prefix) != 0) return false;
    return prefix.back() == '/' || boundaryAt(ref, prefix.size());
  });
}

Status checkImageAllowed(const std::string& team, const std::vector<std::string>& allow,
                         const model::ImageRef& ref, const char* field) {
  const std::string text = ref.str();
  if (imageAllowed(allow, text)) return Status::Ok();
  std::string listed;
  for (const auto& a : allow) listed += (listed.empty() ? "" : ", ") + a;
  return Status::InvalidArgument(
      std::string(field) + ": " + text + " is not an image team '" + team + "' may use" +
          (allow.empty() ? " (platform admins allow it none yet: allot team image-allow set " +
                               team + " REGISTRY/REPOSITORY)"
                         : " (it may use images under " + listed + ")"),
      field);
}

Status validateImageAllow(const std::vector<std::string>& allow) {
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument("allow: " + why, "allow");
  };
  if (allow.size() > kMaxImageAllowPrefixes)
    return bad("at most " + std::to_string(kMaxImageAllowPrefixes) + " prefixes");
  std::set<std::string> seen;
  for (const auto& p : allow) {
    if (p.empty()) return bad("an empty prefix would allow every image");
    if (p.size() > 255) return bad("a prefix is at most 255 characters");
    if (!std::all_of(p.begin(), p.end(), referenceChar))
      return bad("'" + p + "' holds a character no image reference holds");
    // The registry comes first, as in every reference: a bare "ml/" would match nothing, and a
    // registry given only in part ("registry:50") must not be read as a prefix of others.
    const std::string registry = p.substr(0, p.find('/'));
    if (registry.empty() || p.find("//") != std::string::npos ||
        (registry.find('.') == std::string::npos && registry.find(':') == std::string::npos &&
         registry != "localhost"))
      return bad("'" + p +
                 "' must start with a registry (host:port or a domain), e.g. "
                 "registry.example.com/ml/");
    if (!seen.insert(p).second) return bad("'" + p + "' is listed twice");
  }
  return Status::Ok();
}

}  // namespace allot::control
