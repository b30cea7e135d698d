#pragma once
// One table per enum gives both its name function and its parser, so the two cannot drift
// apart and a new value is added in one place. For the model's .cc files only.

#include <cstddef>
#include <optional>
#include <string>

namespace allot::model {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `value` in `table`, or `fallback` for a value outside the enum (a corrupt cast).
template <typename E, size_t N>
const char* nameIn(const EnumName<E> (&table)[N], E value, const char* fallback) {
  for (const auto& e : table) {
    if (e.value == value) return e.name;
  }
  return fallback;
}

template <typename E, size_t N>
std::optional<E> parseIn(const EnumName<E> (&table)[N], const std::string& s) {
  for (const auto& e : table) {
    if (s == e.name) return e.value;
  }
  return std::nullopt;
}

}  // namespace allot::model
