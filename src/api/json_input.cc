#include "api/json_input.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/bounded_json.h"

namespace allot::api {

namespace {

// An integer's value, with unsigned ones above INT64_MAX held at INT64_MAX (so they fail a range
// check instead of wrapping to a negative number).
int64_t asInt64(const nlohmann::json& v) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    return std::numeric_limits<int64_t>::max();
  return v.get<int64_t>();
}

}  // namespace

std::string jsonTypeName(const nlohmann::json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  return v.type_name();
}

Result<JsonInput> JsonInput::parse(const std::string& body,
                                   std::initializer_list<const char*> allowed) {
  nlohmann::json j;
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) {
    j = nlohmann::json::object();
  } else {
    if (!jsonNestingWithin(body))
      return Status::InvalidArgument(
          "body: nested deeper than " + std::to_string(kMaxJsonDepth) + " levels", "body");
    j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);  // depth checked above
    if (j.is_discarded()) return Status::InvalidArgument("body: malformed JSON", "body");
  }
  if (!j.is_object())
    return Status::InvalidArgument("body: must be a JSON object, got " + jsonTypeName(j), "body");
  for (const auto& item : j.items()) {
    // A plain reference, not a structured binding: clang 14 (the fuzz build) captures no binding.
    const std::string& k = item.key();
    bool known = std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; });
    if (!known) {
      std::string list;
      for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
      return Status::InvalidArgument(k + ": unknown field (known: " + list + ")", k);
    }
  }
  return JsonInput(std::move(j));
}

Result<std::string> JsonInput::requiredString(const char* field) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null())
    return Status::InvalidArgument(std::string(field) + ": required", field);
  if (!it->is_string())
    return Status::InvalidArgument(
        std::string(field) + ": must be a string, got " + jsonTypeName(*it), field);
  return it->get<std::string>();
}

Result<std::string> JsonInput::optionalString(const char* field, std::string fallback) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return fallback;
  if (!it->is_string())
    return Status::InvalidArgument(
        std::string(field) + ": must be a string, got " + jsonTypeName(*it), field);
  return it->get<std::string>();
}

Result<int> JsonInput::optionalInt(const char* field, int fallback, int min, int max) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return fallback;
  if (!it->is_number_integer())
    return Status::InvalidArgument(
        std::string(field) + ": must be an integer, got " + jsonTypeName(*it), field);
  // Above INT64_MAX an unsigned number would read back negative (18446744073709551615 as -1).
  const int64_t v = asInt64(*it);
  if (v < min || v > max)
    return Status::InvalidArgument(std::string(field) + ": must be between " + std::to_string(min) +
                                       " and " + std::to_string(max) + ", got " + std::to_string(v),
                                   field);
  return static_cast<int>(v);
}

Result<bool> JsonInput::optionalBool(const char* field, bool fallback) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    return Status::InvalidArgument(
        std::string(field) + ": must be true or false, got " + jsonTypeName(*it), field);
  return it->get<bool>();
}

Result<double> JsonInput::optionalNumber(const char* field, double fallback) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return fallback;
  if (!it->is_number())
    return Status::InvalidArgument(
        std::string(field) + ": must be a number, got " + jsonTypeName(*it), field);
  return it->get<double>();
}

Result<std::vector<std::string>> JsonInput::optionalStringArray(const char* field) const {
  if (!has(field) || j_.at(field).is_null()) return std::vector<std::string>{};
  return requiredStringArray(field);
}

Result<std::vector<int>> JsonInput::optionalIntArray(const char* field, int min, int max) const {
  std::vector<int> out;
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return out;
  if (!it->is_array())
    return Status::InvalidArgument(
        std::string(field) + ": must be an array of integers, got " + jsonTypeName(*it), field);
  for (const auto& v : *it) {
    if (!v.is_number_integer() || asInt64(v) < min || asInt64(v) > max)
      return Status::InvalidArgument(std::string(field) + ": each must be an integer from " +
                                         std::to_string(min) + " to " + std::to_string(max) +
                                         ", got " + v.dump(),
                                     field);
    out.push_back(v.get<int>());
  }
  return out;
}

Result<std::map<std::string, int>> JsonInput::optionalIntMap(const char* field, int min,
                                                             int max) const {
  std::map<std::string, int> out;
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return out;
  if (!it->is_object())
    return Status::InvalidArgument(
        std::string(field) + ": must be an object of integers, got " + jsonTypeName(*it), field);
  for (const auto& [k, v] : it->items()) {
    if (!v.is_number_integer())
      return Status::InvalidArgument(
          std::string(field) + "." + k + ": must be an integer, got " + jsonTypeName(v), field);
    const int64_t n = asInt64(v);
    if (n < min || n > max)
      return Status::InvalidArgument(std::string(field) + "." + k + ": must be between " +
                                         std::to_string(min) + " and " + std::to_string(max) +
                                         ", got " + std::to_string(n),
                                     field);
    out[k] = static_cast<int>(n);
  }
  return out;
}

Result<std::vector<std::string>> JsonInput::requiredStringArray(const char* field) const {
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null())
    return Status::InvalidArgument(std::string(field) + ": required", field);
  if (!it->is_array())
    return Status::InvalidArgument(
        std::string(field) + ": must be an array of strings, got " + jsonTypeName(*it), field);
  std::vector<std::string> out;
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& e = (*it)[i];
    if (!e.is_string())
      return Status::InvalidArgument(std::string(field) + "[" + std::to_string(i) +
                                         "]: must be a string, got " + jsonTypeName(e),
                                     field);
    out.push_back(e.get<std::string>());
  }
  return out;
}

Result<std::map<std::string, std::string>> JsonInput::optionalStringMap(const char* field) const {
  std::map<std::string, std::string> out;
  auto it = j_.find(field);
  if (it == j_.end() || it->is_null()) return out;
  if (!it->is_object())
    return Status::InvalidArgument(
        std::string(field) + ": must be an object of strings, got " + jsonTypeName(*it), field);
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string())
      return Status::InvalidArgument(
          std::string(field) + "." + k + ": must be a string, got " + jsonTypeName(v), field);
    out[k] = v.get<std::string>();
  }
  return out;
}

const nlohmann::json* JsonInput::object(const char* field) const {
  auto it = j_.find(field);
  if (it == j_.end() || !it->is_object()) return nullptr;
  return &*it;
}

}  // namespace allot::api
