#pragma once
// Small pieces the model's JSON encoders and decoders share: how an unset value is written for
// the API (null), and how an optional or nested field is read. For the model's .cc files only.

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "common/status.h"
#include "common/time_format.h"

namespace allot::model::fields {

using nlohmann::json;

// The API writes "not set" as null: an empty text, a zero time, an absent optional.
inline json nullIfEmpty(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }
inline json timeOrNull(TimeMs t) { return t ? json(formatIso8601(t)) : json(nullptr); }
template <typename T>
json valueOrNull(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// `key` of `j`, or nullopt where it is absent or null.
template <typename T>
std::optional<T> readOptional(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

// `key` of `j` when it is present and an object, else null: documents and messages written
// before the field existed leave it out.
inline const json* objectAt(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? &*it : nullptr;
}

// Decodes the object at `key`, when there is one, into `out`; an object that does not decode is
// the error.
template <typename T, typename Decode>
Status decodeObjectAt(const json& j, const char* key, Decode&& decode, std::optional<T>& out) {
  const json* o = objectAt(j, key);
  if (!o) return Status::Ok();
  Result<T> r = decode(*o);
  if (!r.ok()) return r.status();
  out = std::move(r).value();
  return Status::Ok();
}

// An enum read from a stored document, where an unknown name is corruption: throws
// "unknown <what> '<name>'" for the store to report.
// Runs a store decoder's body so that nothing it throws (nlohmann on a missing or mistyped field,
// parseStored on an unknown name) leaves the model: the store gets a Status instead.
template <typename F>
auto decodedOrStatus(F&& body) -> Result<decltype(body())> {
  try {
    return body();
  } catch (const std::exception& e) {
    return Status::Internal(std::string("stored document does not decode: ") + e.what());
  }
}

template <typename E>
E parseStored(std::optional<E> (*parse)(const std::string&), const std::string& name,
              const char* what) {
  auto parsed = parse(name);
  if (!parsed) throw std::runtime_error(std::string("unknown ") + what + " '" + name + "'");
  return *parsed;
}

}  // namespace allot::model::fields
