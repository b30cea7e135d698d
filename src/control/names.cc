#include "control/names.h"

#include <cctype>

namespace allot::control {
namespace {

std::string teamList(const std::map<std::string, model::Role>& teams) {
  std::string out;
  for (const auto& [team, role] : teams) out += (out.empty() ? "" : ", ") + team;
  return out;
}

}  // namespace

Status validateName(const std::string& value, const char* field) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string(field) + ": " + why, field);
  };
  if (value.empty()) return bad("must not be empty");
  if (value.size() > 63) return bad("must be at most 63 characters");
  if (!std::isalnum(static_cast<unsigned char>(value[0])) ||
      std::isupper(static_cast<unsigned char>(value[0])))
    return bad("'" + value + "' must start with a lowercase letter or digit");
  for (char c : value) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!ok) return bad("'" + value + "' may contain only a-z, 0-9, '-', '_' and '.'");
  }
  return Status::Ok();
}

Status validateGpuModel(const std::string& value, const std::string& field) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(field + ": " + why, field);
  };
  if (value.empty()) return bad("a GPU model must not be empty");
  if (value.size() > 128) return bad("a GPU model is at most 128 characters");
  if (value == "any") return bad("'any' is not a GPU model");
  if (value.front() == ' ' || value.back() == ' ')
    return bad("GPU model '" + value + "' must not start or end with a space");
  for (char c : value) {
    if (c < 0x20 || c > 0x7e || c == ',' || c == '=')
      return bad("GPU model '" + value +
                 "' may contain only printable ASCII other than ',' and '='");
  }
  return Status::Ok();
}

std::string teamRequired(const Principal& p) {
  if (p.teams.empty()) return "team: required (you belong to no team)";
  return "team: required: you belong to several teams (" + teamList(p.teams) + "); name one";
}

}  // namespace allot::control
