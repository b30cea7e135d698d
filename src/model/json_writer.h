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
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/time_format.h"
#include "common/utf8.h"

namespace allot::model {

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}
  bool ok() const { return ok_; }

  // A key of the program's own: a literal, never escaped, written with its comma and quotes in
  // one append of a length known here (it was three, each a call into libstdc++, two of them
  // with a strlen; docs/benchmarks.md, section 1).
  template <size_t N>
  void key(const char (&k)[N]) {
    char text[N + 3];  // ,"k":
    text[0] = ',';
    text[1] = '"';
    std::memcpy(text + 2, k, N - 1);
    text[N + 1] = '"';
    text[N + 2] = ':';
    const size_t skip = first_ ? 1 : 0;
    out_.append(text + skip, N + 3 - skip);
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
    // Runs that need no escape (nearly every string) are appended whole, and looked through
    // eight bytes at a time.
    size_t run = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      while (i + 8 <= s.size() && !mayNeedEscape(s.data() + i)) i += 8;
      if (i == s.size()) break;
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
  template <size_t N>
  void string(const char (&k)[N], const std::string& v) {
    key(k);
    string(v);
  }
  template <size_t N>
  void number(const char (&k)[N], int64_t v) {
    key(k);
    number(v);
  }
  template <size_t N>
  void boolean(const char (&k)[N], bool v) {
    key(k);
    boolean(v);
  }
  template <size_t N, typename T>
  void numberOrNull(const char (&k)[N], const std::optional<T>& v) {
    key(k);
    numberOrNull(v);
  }
  template <size_t N>
  void stringOrNull(const char (&k)[N], const std::string& v) {
    key(k);
    stringOrNull(v);
  }
  template <size_t N>
  void timeOrNull(const char (&k)[N], TimeMs t) {
    key(k);
    timeOrNull(t);
  }
  template <size_t N>
  void strings(const char (&k)[N], const std::vector<std::string>& v) {
    key(k);
    strings(v);
  }
  template <size_t N, typename T>
  void numbers(const char (&k)[N], const std::vector<T>& v) {
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
  // Whether any of the eight bytes at p may be a control character, '"' or '\\' (exact when none
  // is; a byte right after one that is may be counted too, which only sends those eight bytes
  // through the byte-by-byte loop).
  static bool mayNeedEscape(const char* p) {
    constexpr uint64_t kOnes = 0x0101010101010101ULL, kHighs = 0x8080808080808080ULL;
    uint64_t w;
    std::memcpy(&w, p, sizeof w);
    auto zeroByte = [](uint64_t v) { return (v - kOnes) & ~v & kHighs; };
    const uint64_t control = (w - kOnes * 0x20) & ~w & kHighs;  // a byte below 0x20
    return (control | zeroByte(w ^ (kOnes * '"')) | zeroByte(w ^ (kOnes * '\\'))) != 0;
  }

  std::string& out_;
  bool first_ = true;
  bool ok_ = true;
};

}  // namespace allot::model
