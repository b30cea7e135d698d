#pragma once
// JsonWriter: appends JSON text to a string directly, writing what nlohmann's dump() writes for
// the same values (compact, the same escapes), for the documents written often enough that
// building a nlohmann::json first costs more than the writing (a job's reply, an agent's desired
// state). It remembers whether every string was valid UTF-8 (dump() would throw on one that is
// not): the text is to be used only if ok(), else built the slow way.
//
// nlohmann's objects keep their keys sorted; a writer that must match dump() byte for byte
// writes them in that order.

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/time_format.h"
#include "common/utf8.h"

namespace allot::model {

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}
  bool ok() const { return ok_; }

  // A key of the program's own (a literal: never escaped).
  void key(const char* k) {
    const std::string_view name(k);
    out_.append(first_ ? "\"" : ",\"", first_ ? 1 : 2);
    out_.append(name);
    out_.append("\":", 2);
    first_ = false;
  }
  void beginObject() {
    out_ += '{';
    first_ = true;
  }
  void endObject() {
    out_ += '}';
    first_ = false;
  }
  void beginArray() {
    out_ += '[';
    first_ = true;
  }
  void endArray() {
    out_ += ']';
    first_ = false;
  }
  // The next element of an array begun with beginArray(): a comma unless it is the first.
  void element() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  // Text that is already JSON (a value dumped elsewhere).
  void raw(const std::string& json) { out_ += json; }
  // A key that is the caller's text (an environment variable's name): escaped like any string.
  void key(const std::string& k) {
    if (!first_) out_ += ',';
    string(k);
    out_ += ':';
    first_ = false;
  }
  void null() { out_ += "null"; }
  void boolean(bool b) { out_ += b ? "true" : "false"; }
  void number(int64_t v) {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, r.ptr);
  }
  void string(const std::string& s) {
    if (!isValidUtf8(s)) ok_ = false;
    out_ += '"';
    // Runs that need no escape (nearly every string) are appended whole.
    size_t run = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c >= 0x20 && c != '"' && c != '\\') continue;
      out_.append(s, run, i - run);
      run = i + 1;
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\b':
          out_ += "\\b";
          break;
        case '\f':
          out_ += "\\f";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        default: {
          static const char* kHex = "0123456789abcdef";
          out_ += "\\u00";
          out_ += kHex[c >> 4];
          out_ += kHex[c & 0xF];
        }
      }
    }
    out_.append(s, run, s.size() - run);
    out_ += '"';
  }
  void stringOrNull(const std::string& s) { s.empty() ? null() : string(s); }
  void timeOrNull(TimeMs t) { t ? string(formatIso8601(t)) : null(); }
  template <typename T>
  void numberOrNull(const std::optional<T>& v) {
    v ? number(*v) : null();
  }
  // A key and its value in one call.
  void string(const char* k, const std::string& v) {
    key(k);
    string(v);
  }
  void number(const char* k, int64_t v) {
    key(k);
    number(v);
  }
  void boolean(const char* k, bool v) {
    key(k);
    boolean(v);
  }
  template <typename T>
  void numberOrNull(const char* k, const std::optional<T>& v) {
    key(k);
    numberOrNull(v);
  }
  void stringOrNull(const char* k, const std::string& v) {
    key(k);
    stringOrNull(v);
  }
  void timeOrNull(const char* k, TimeMs t) {
    key(k);
    timeOrNull(t);
  }
  void strings(const char* k, const std::vector<std::string>& v) {
    key(k);
    strings(v);
  }
  template <typename T>
  void numbers(const char* k, const std::vector<T>& v) {
    key(k);
    numbers(v);
  }
  void strings(const std::vector<std::string>& v) {
    out_ += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out_ += ',';
      string(v[i]);
    }
    out_ += ']';
  }
  template <typename T>
  void numbers(const std::vector<T>& v) {
    out_ += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out_ += ',';
      number(v[i]);
    }
    out_ += ']';
  }

 private:
  std::string& out_;
  bool first_ = true;
  bool ok_ = true;
};

}  // namespace allot::model
