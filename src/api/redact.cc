#include "api/redact.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <vector>

namespace allot::api {

using nlohmann::json;

namespace {

constexpr std::array<std::string_view, 12> kSecretWords = {
    "password", "passwd", "token",      "tokens",      "secret", "secrets",
    "hash",     "key",    "credential", "credentials", "apikey", "passphrase"};

// "join_token" -> {join, token}; "apiKey" -> {api, key}; "HF_TOKEN" -> {hf, token}.
std::vector<std::string> wordsOf(std::string_view key) {
  std::vector<std::string> words(1);
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char c = key[i];
    if (c == '_' || c == '-' || c == '.' || c == ' ') {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    const bool upper = std::isupper(c) != 0;
    if (upper && i > 0 && std::islower(static_cast<unsigned char>(key[i - 1])) &&
        !words.back().empty())
      words.emplace_back();
    words.back() += static_cast<char>(std::tolower(c));
  }
  return words;
}

}  // namespace

bool namesSecret(std::string_view key) {
  for (const auto& w : wordsOf(key)) {
    if (std::find(kSecretWords.begin(), kSecretWords.end(), w) != kSecretWords.end()) return true;
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
