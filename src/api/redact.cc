#include "api/redact.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/ascii.h"

namespace allot::api {

using nlohmann::json;

namespace {

constexpr std::array<std::string_view, 12> kSecretWords = {
    "password", "passwd", "token",      "tokens",      "secret", "secrets",
    "hash",     "key",    "credential", "credentials", "apikey", "passphrase"};

bool isSecretWord(std::string_view word) {
  return std::find(kSecretWords.begin(), kSecretWords.end(), word) != kSecretWords.end();
}

}  // namespace

// Words split as "join_token" -> {join, token}, "apiKey" -> {api, key}, "HF_TOKEN" -> {hf, token},
// lowercased into a buffer on the stack: every key of every audited write comes through here.
bool namesSecret(std::string_view key) {
  constexpr size_t kLongestWord = 16;  // longer than any secret word: such a word is none
  char word[kLongestWord];
  size_t len = 0;
  bool tooLong = false;
  auto wordEnds = [&] {
    const bool secret = !tooLong && len > 0 && isSecretWord(std::string_view(word, len));
    len = 0;
    tooLong = false;
    return secret;
  };
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char c = key[i];
    if (c == '_' || c == '-' || c == '.' || c == ' ') {
      if (wordEnds()) return true;
      continue;
    }
    // ASCII only, as the "C" locale's isupper and tolower are, without their calls per byte.
    const bool upper = c >= 'A' && c <= 'Z';
    if (upper && i > 0 && key[i - 1] >= 'a' && key[i - 1] <= 'z' && len > 0) {
      if (wordEnds()) return true;
    }
    if (len < kLongestWord)
      word[len++] = asciiLower(static_cast<char>(c));
    else
      tooLong = true;
  }
  return wordEnds();
}

bool holdsSecrets(const json& root) {
  std::vector<const json*> pending = {&root};
  while (!pending.empty()) {
    const json* node = pending.back();
    pending.pop_back();
    if (node->is_object()) {
      for (const auto& item : node->items()) {
        if (namesSecret(item.key()) && !item.value().is_null()) return true;
        if (item.value().is_structured()) pending.push_back(&item.value());
      }
    } else if (node->is_array()) {
      for (const auto& v : *node) {
        if (v.is_structured()) pending.push_back(&v);
      }
    }
  }
  return false;
}

bool textMayNameSecrets(std::string_view text) {
  // Every secret word contains one of these ("passwd", "passphrase" and "password" share
  // "pass"; "apikey" has "key"); an escape (\u0074oken) could spell any of them.
  static constexpr std::array<std::string_view, 6> kStems = {"pass", "token", "secret",
                                                             "hash", "key",   "credential"};
  // 1 + the index of the stem a letter starts, in either case (no two stems start alike), else 0.
  static constexpr auto kStemStartingWith = [] {
    std::array<uint8_t, 256> at{};
    for (size_t i = 0; i < kStems.size(); ++i) {
      const char first = kStems[i][0];
      at[static_cast<unsigned char>(first)] = static_cast<uint8_t>(i + 1);
      at[static_cast<unsigned char>(first - 'a' + 'A')] = static_cast<uint8_t>(i + 1);
    }
    return at;
  }();
  if (text.find('\\') != std::string_view::npos) return true;
  // One pass over the text, which runs on the body and the reply of every audited write: a table
  // lookup a byte, and a stem compared only where its first two letters are. Every stem has at
  // least three letters, so the last byte starts none.
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    const uint8_t stem = kStemStartingWith[static_cast<unsigned char>(text[i])];
    if (stem == 0) continue;
    const std::string_view word = kStems[stem - 1];
    if (asciiLower(text[i + 1]) == word[1] && asciiIEquals(text.substr(i, word.size()), word))
      return true;
  }
  return false;
}

json redactSecrets(json j) {
  // An explicit stack, not recursion: whatever depth the document has, the stack holds.
  std::vector<json*> pending = {&j};
  while (!pending.empty()) {
    json* node = pending.back();
    pending.pop_back();
    if (node->is_object()) {
      for (auto& item : node->items()) {
        json& value = item.value();
        if (namesSecret(item.key()) && !value.is_null())
          value = "[redacted]";
        else if (value.is_structured())
          pending.push_back(&value);
      }
    } else if (node->is_array()) {
      for (auto& v : *node) {
        if (v.is_structured()) pending.push_back(&v);
      }
    }
  }
  return j;
}

}  // namespace allot::api
