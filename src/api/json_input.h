#pragma once
// Strict reading of a JSON request body: it must be an object, every field must be known, and
// each field must have the right type. Errors name the field, and nothing is half-read: handlers
// read every field first, then act.

#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace allot::api {

class JsonInput {
 public:
  // An empty body reads as {}.
  static Result<JsonInput> parse(const std::string& body,
                                 std::initializer_list<const char*> allowed);

  Result<std::string> requiredString(const char* field) const;
  Result<std::string> optionalString(const char* field, std::string fallback = "") const;
  Result<int> optionalInt(const char* field, int fallback, int min, int max) const;
  Result<bool> optionalBool(const char* field, bool fallback) const;
  // Any JSON number (2 and 2.5 alike).
  Result<double> optionalNumber(const char* field, double fallback) const;
  Result<std::vector<std::string>> requiredStringArray(const char* field) const;
  Result<std::vector<std::string>> optionalStringArray(const char* field) const;
  // An array of integers, each between min and max; absent or null reads as empty.
  Result<std::vector<int>> optionalIntArray(const char* field, int min, int max) const;
  // An object of integers, {"A100": 4}, each between min and max.
  Result<std::map<std::string, int>> optionalIntMap(const char* field, int min, int max) const;
  // Whether the body has the field at all, null included: for "omitted keeps, null clears".
  bool has(const char* field) const { return j_.contains(field); }
  Result<std::map<std::string, std::string>> optionalStringMap(const char* field) const;
  const nlohmann::json* object(const char* field) const;
  const nlohmann::json& root() const { return j_; }

 private:
  explicit JsonInput(nlohmann::json j) : j_(std::move(j)) {}
  nlohmann::json j_;
};

// The JSON type name a person would use: "string", "number", "array"...
std::string jsonTypeName(const nlohmann::json& v);

}  // namespace allot::api
