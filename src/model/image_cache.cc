#include "model/image_cache.h"

#include <algorithm>

#include "common/bounded_json.h"
#include "model/image_ref.h"

namespace allot::model {

using nlohmann::json;

namespace {

// A string field within kMaxImageText; throws naming it otherwise.
std::string text(const json& j, const char* key, bool required = true) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) throw std::runtime_error(std::string(key) + " is missing");
    return "";
  }
  if (!it->is_string()) throw std::runtime_error(std::string(key) + " is not a string");
  std::string s = it->get<std::string>();
  if (s.size() > kMaxImageText) throw std::runtime_error(std::string(key) + " is too long");
  return s;
}

int64_t count(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return 0;
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    throw std::runtime_error(std::string(key) + " is not a count");
  return it->get<int64_t>();
}

const json& array(const json& j, const char* key, size_t most) {
  static const json kNone = json::array();
  auto it = j.find(key);
  if (it == j.end()) return kNone;
  if (!it->is_array()) throw std::runtime_error(std::string(key) + " is not an array");
  if (it->size() > most)
    throw std::runtime_error(std::string(key) + ": more than " + std::to_string(most));
  return *it;
}

}  // namespace

json toJson(const ImageCommands& c) {
  json j = {{"prunes", c.prunes}, {"prepulls", c.prepulls}};
  // Only when there are some: an older agent reads the rest as before.
  if (!c.prepullLogins.empty()) {
    json logins = json::object();
    for (const auto& [ref, a] : c.prepullLogins)
      logins[ref] = {{"registry", a.registry}, {"username", a.username}, {"password", a.password}};
    j["prepull_logins"] = std::move(logins);
  }
  return j;
}

Result<ImageCommands> imageCommandsFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("images: not an object");
  if (!fractionsWithinIntRange(j))
    return Status::InvalidArgument("images: a number is out of range (a fraction past 2^31)");
  try {
    ImageCommands c;
    c.prunes = count(j, "prunes");
    for (const auto& r : array(j, "prepulls", kMaxPrepulls)) {
      if (!r.is_string() || r.get<std::string>().size() > kMaxImageText)
        throw std::runtime_error("prepulls: not a reference");
      c.prepulls.push_back(r.get<std::string>());
    }
    if (j.contains("prepull_logins")) {
      const json& logins = j.at("prepull_logins");
      if (!logins.is_object() || logins.size() > kMaxPrepulls)
        throw std::runtime_error("prepull_logins: not an object of at most 64 logins");
      for (const auto& [ref, a] : logins.items()) {
        if (std::find(c.prepulls.begin(), c.prepulls.end(), ref) == c.prepulls.end())
          throw std::runtime_error("prepull_logins: " + ref.substr(0, 80) + " is not a prepull");
        RegistryAuth auth;
        for (auto [key, into] : {std::pair<const char*, std::string*>{"registry", &auth.registry},
                                 {"username", &auth.username},
                                 {"password", &auth.password}}) {
          if (!a.is_object() || !a.contains(key) || !a.at(key).is_string() ||
              a.at(key).get<std::string>().size() > kMaxImageText)
            throw std::runtime_error(std::string("prepull_logins: no ") + key);
          *into = a.at(key).get<std::string>();
        }
        c.prepullLogins[ref] = std::move(auth);
      }
    }
    return c;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("images: ") + e.what());
  }
}

std::string encodeImageReport(const ImageReport& r) {
  json images = json::array(), prepulls = json::array();
  for (const auto& i : r.images)
    images.push_back({{"ref", i.ref},
                      {"digest", i.digest},
                      {"bytes", i.bytes},
                      {"last_used_ms", i.lastUsedMs},
                      {"in_use", i.inUse},
                      {"min_cuda", i.minCuda}});
  for (const auto& p : r.prepulls)
    prepulls.push_back({{"ref", p.ref},
                        {"failed", p.failed},
                        {"message", p.message},
                        {"bytes", p.bytes},
                        {"total", p.total}});
  return json{{"type", "images"},
              {"images", images},
              {"disk_bytes", r.diskBytes},
              {"budget_bytes", r.budgetBytes},
              {"prunes_done", r.prunesDone},
              {"prepulls", prepulls}}
      .dump();
}

Result<ImageReport> imageReportFromJson(const json& msg) {
  // (value() would throw on a "type" that is not a string.)
  const auto type = msg.is_object() ? msg.find("type") : msg.end();
  if (type == msg.end() || !type->is_string() || type->get<std::string>() != "images")
    return Status::InvalidArgument("not an image report");
  if (!fractionsWithinIntRange(msg))
    return Status::InvalidArgument("image report: a number is out of range (a fraction past 2^31)");
  try {
    ImageReport r;
    for (const auto& i : array(msg, "images", kMaxReportedImages)) {
      if (!i.is_object()) throw std::runtime_error("images: an entry is not an object");
      CachedImage c;
      c.ref = text(i, "ref");
      c.digest = text(i, "digest");
      c.bytes = count(i, "bytes");
      c.lastUsedMs = count(i, "last_used_ms");
      c.inUse = i.value("in_use", false);
      c.minCuda = i.value("min_cuda", "");
      if (!c.minCuda.empty() && !isCudaRequirement(c.minCuda))
        return Status::InvalidArgument("bad image report: min_cuda is not a version like 12.1");
      r.images.push_back(std::move(c));
    }
    r.diskBytes = count(msg, "disk_bytes");
    r.budgetBytes = count(msg, "budget_bytes");
    r.prunesDone = count(msg, "prunes_done");
    for (const auto& p : array(msg, "prepulls", kMaxPrepulls)) {
      if (!p.is_object()) throw std::runtime_error("prepulls: an entry is not an object");
      PrepullState s;
      s.ref = text(p, "ref");
      s.failed = p.value("failed", false);
      s.message = text(p, "message", false);
      s.bytes = count(p, "bytes");
      s.total = count(p, "total");
      r.prepulls.push_back(std::move(s));
    }
    return r;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("image report: ") + e.what());
  }
}

}  // namespace allot::model
