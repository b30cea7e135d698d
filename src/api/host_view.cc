#include "api/host_view.h"

#include "control/authz.h"
#include "model/json.h"

namespace allot::api {

std::string hideOtherTeams(const control::Principal& p, const std::string& text) {
  constexpr std::string_view kWord = "team ";
  auto nameChar = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
  };
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = text.find(kWord, at)) != std::string::npos;) {
    size_t end = hit + kWord.size();
    while (end < text.size() && nameChar(text[end])) ++end;
    // A sentence's full stop is not part of the name.
    size_t nameEnd = end;
    while (nameEnd > hit + kWord.size() && text[nameEnd - 1] == '.') --nameEnd;
    const std::string name = text.substr(hit + kWord.size(), nameEnd - hit - kWord.size());
    out.append(text, at, hit - at);
    if (!name.empty() && !control::authz::canSeeTeam(p, name)) {
      out += "another team";
      at = nameEnd;
    } else {
      out.append(text, hit, end - hit);
      at = end;
    }
  }
  out.append(text, at, std::string::npos);
  return out;
}

nlohmann::json hostJsonFor(const control::Principal& p, const model::Host& h) {
  nlohmann::json out = model::toJson(h);
  if (h.handover && !h.handover->team.empty() && !control::authz::canSeeTeam(p, h.handover->team))
    out["handover_to"] = "another team";
  for (const char* field : {"admin_reason", "drain_reason", "task"}) {
    if (auto it = out.find(field); it != out.end() && it->is_string())
      *it = hideOtherTeams(p, it->get<std::string>());
  }
  return out;
}

}  // namespace allot::api
