#include "model/image_ref.h"

#include <algorithm>
#include <cctype>

#include "common/version.h"

namespace allot::model {
namespace {

constexpr size_t kMaxName = 255;  // registry and repository, as the distribution project caps it
constexpr size_t kMaxTag = 128;
constexpr const char* kForm =
    "REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST], e.g. registry:5000/ml/pytorch:2.3";

bool lowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A path component: lower-case alphanumerics separated by one of ".", "_", "__" or runs of "-".
bool validComponent(const std::string& c) {
  if (c.empty() || !lowerAlnum(c.front()) || !lowerAlnum(c.back())) return false;
  for (size_t i = 0; i < c.size(); ++i) {
    char ch = c[i];
    if (lowerAlnum(ch) || ch == '-') continue;
    if (ch == '.' && lowerAlnum(c[i + 1])) continue;
    if (ch == '_' && (lowerAlnum(c[i + 1]) || (c[i + 1] == '_' && lowerAlnum(c[i + 2])))) {
      if (c[i + 1] == '_') ++i;
      continue;
    }
    return false;
  }
  return true;
}

// host[:port]: DNS labels (letters, digits, "-", not at either end) joined by ".", or an IPv4
// address; the port 1-65535.
bool validRegistry(const std::string& r) {
  std::string host = r, port;
  if (auto colon = r.rfind(':'); colon != std::string::npos) {
    host = r.substr(0, colon);
    port = r.substr(colon + 1);
    if (port.empty() || port.size() > 5) return false;
    for (char c : port)
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    int n = std::stoi(port);
    if (n < 1 || n > 65535) return false;
  }
  if (host.empty() || host.size() > 253) return false;
  size_t start = 0;
  while (start <= host.size()) {
    size_t dot = host.find('.', start);
    if (dot == std::string::npos) dot = host.size();
    std::string label = host.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-')
      return false;
    for (char c : label)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    start = dot + 1;
  }
  return true;
}

bool validTag(const std::string& t) {
  if (t.empty() || t.size() > kMaxTag) return false;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  if (!word(t.front())) return false;
  for (char c : t)
    if (!word(c) && c != '.' && c != '-') return false;
  return true;
}

Status refuse(const std::string& text, const std::string& why) {
  return Status::InvalidArgument("image \"" + text + "\": " + why + " (the form is " + kForm + ")",
                                 "image");
}

}  // namespace

bool isSha256Digest(std::string_view d) {
  if (d.substr(0, 7) != "sha256:" || d.size() != 71) return false;
  return std::all_of(d.begin() + 7, d.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool isCudaRequirement(std::string_view v) { return isDottedVersion(std::string(v)); }

std::string cudaRequirementOf(const std::vector<std::string>& env) {
  constexpr std::string_view kVar = "NVIDIA_REQUIRE_CUDA=", kTerm = "cuda>=";
  for (const std::string& entry : env) {
    if (entry.rfind(kVar, 0) != 0) continue;
    // Space-separated constraints; "cuda>=X.Y" is the one about the toolkit's version (the
    // brand= and driver= alternatives narrow which older drivers are fine, and are not read).
    std::string_view rest = std::string_view(entry).substr(kVar.size());
    while (!rest.empty()) {
      const size_t end = rest.find(' ');
      std::string_view term = rest.substr(0, end);
      if (term.rfind(kTerm, 0) == 0 && isCudaRequirement(term.substr(kTerm.size())))
        return std::string(term.substr(kTerm.size()));
      if (end == std::string_view::npos) break;
      rest.remove_prefix(end + 1);
    }
  }
  return "";
}

std::string ImageRef::str() const {
  std::string out = registry + "/" + repository;
  if (!tag.empty()) out += ":" + tag;
  if (!digest.empty()) out += "@" + digest;
  return out;
}

std::string ImageRef::transport() const {
  return "docker://" + registry + "/" + repository + (digest.empty() ? ":" + tag : "@" + digest);
}

Result<ImageRef> parseImageRef(const std::string& text) {
  if (text.empty()) return refuse(text, "empty");
  if (text.size() > kMaxName + 1 + kMaxTag + 1 + 71)
    return refuse(text.substr(0, 64) + "...", "too long");
  ImageRef ref;
  std::string rest = text;
  if (auto at = rest.find('@'); at != std::string::npos) {
    ref.digest = rest.substr(at + 1);
    rest = rest.substr(0, at);
    if (!isSha256Digest(ref.digest))
      return refuse(text, "the digest must be sha256: and 64 lower-case hex digits");
  }
  auto slash = rest.find('/');
  if (slash == std::string::npos)
    return refuse(text, "name the registry: Allot has no default registry");
  ref.registry = rest.substr(0, slash);
  std::string path = rest.substr(slash + 1);
  // The registry is the first component only when it looks like a host: a ".", a ":" or
  // "localhost" (the distribution project's rule); "ml/pytorch" names no registry.
  if (ref.registry.find_first_of(".:") == std::string::npos && ref.registry != "localhost")
    return refuse(text, "name the registry (\"" + ref.registry +
                            "\" is not a host: it needs a \".\" or a port)");
  if (!validRegistry(ref.registry))
    return refuse(text, "\"" + ref.registry + "\" is not a host[:port]");
  // A ":" after the last "/" starts the tag.
  if (auto colon = path.rfind(':');
      colon != std::string::npos && path.find('/', colon) == std::string::npos) {
    ref.tag = path.substr(colon + 1);
    path = path.substr(0, colon);
    if (!validTag(ref.tag))
      return refuse(text, "the tag \"" + ref.tag +
                              "\" must be letters, digits, \"_\", \".\" or \"-\" (at most 128)");
  }
  if (path.empty()) return refuse(text, "no repository");
  if (ref.registry.size() + 1 + path.size() > kMaxName)
    return refuse(text, "the name is over 255 characters");
  size_t start = 0;
  while (start <= path.size()) {
    size_t next = path.find('/', start);
    if (next == std::string::npos) next = path.size();
    const std::string component = path.substr(start, next - start);
    if (!validComponent(component))
      return refuse(text, "\"" + component +
                              "\" is not a repository component (lower-case letters and digits, "
                              "joined by \".\", \"_\" or \"-\")");
    start = next + 1;
  }
  ref.repository = path;
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return ref;
}

}  // namespace allot::model
