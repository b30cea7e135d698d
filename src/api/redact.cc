#include "api/redact.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/ascii.h"

namespace allot::api {

using nlohmann::json;

namespace {

// A word that is one of these names a secret.
constexpr std::array<std::string_view, 16> kSecretWords = {
    "password", "passwords", "passwd", "pwd",  "passphrase", "token",       "tokens", "secret",
    "secrets",  "hash",      "key",    "keys", "credential", "credentials", "apikey", "apikeys"};

// A word that ends in one of these names a secret too: "PGPASSWORD", "dbpassword", "HFTOKEN" and
// "clientsecret" are single words that hide one. "key", "hash" and "pwd" are not among them
// ("monkey", "rehash", "OLDPWD"). ("PWD" alone is redacted with "MYSQL_PWD": a directory, but a
// harmless loss from the audit log.)
constexpr std::array<std::string_view, 9> kSecretEndings = {
    "password", "passwords", "passwd",  "passphrase", "token",
    "tokens",   "secret",    "secrets", "credential"};

bool isSecretWord(std::string_view word) {
  for (std::string_view w : kSecretWords) {
    if (asciiIEquals(word, w)) return true;
  }
  for (std::string_view ending : kSecretEndings) {
    if (word.size() > ending.size() &&
        asciiIEquals(word.substr(word.size() - ending.size()), ending))
      return true;
  }
  return false;
}

bool isLower(char c) { return c >= 'a' && c <= 'z'; }
bool isUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

// Words are runs of ASCII letters and digits, split where the case or kind changes the way names
// are written: "join_token" -> {join, token}, "apiKey" -> {api, Key}, "HFToken" -> {HF, Token},
// "GITHUB_TOKEN2" -> {GITHUB, TOKEN, 2}. Anything else (punctuation, other bytes) separates.
// No copy is made: every key of every audited write comes through here.
bool namesSecret(std::string_view key) {
  size_t begin = 0;
  for (size_t i = 0; i <= key.size(); ++i) {
    bool ends = i == key.size();
    bool separator = false;
    if (!ends) {
      const char c = key[i];
      separator = !isLower(c) && !isUpper(c) && !isDigit(c);
      if (separator) {
        ends = true;
      } else if (i > begin) {
        const char before = key[i - 1];
        const bool humpAfterSmall = isUpper(c) && isLower(before);
        const bool humpAfterCapitals =
            isUpper(c) && isUpper(before) && i + 1 < key.size() && isLower(key[i + 1]);
        const bool digitsChange = isDigit(c) != isDigit(before);
        ends = humpAfterSmall || humpAfterCapitals || digitsChange;
      }
    }
    if (!ends) continue;
    if (i > begin && isSecretWord(key.substr(begin, i - begin))) return true;
    begin = separator ? i + 1 : i;
  }
  return false;
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

namespace {

// Every secret word and ending contains one of these ("passwd", "passphrase" and "password"
// share "pass"; "apikey" has "key"); no two start with the same two letters.
constexpr std::array<std::string_view, 7> kStems = {"pass", "token",      "secret", "hash",
                                                    "key",  "credential", "pwd"};

// Whether a stem starts at text[i], in any case; text[i + 1] exists.
bool stemAt(std::string_view text, size_t i) {
  const char first = asciiLower(text[i]);
  const char second = asciiLower(text[i + 1]);
  for (std::string_view stem : kStems) {
    if (first == stem[0] && second == stem[1])
      return asciiIEquals(text.substr(i, stem.size()), stem);
  }
  return false;
}

#if defined(__SSE2__)
// A bit for each of the 16 positions from p where the two bytes there are a stem's first two
// letters in any case (p[0..16] are read). OR 0x20 turns an ASCII capital into its small letter
// and leaves a small letter as it is; the only other byte it maps onto a small letter is that
// letter's capital, so the bit is exact for letters.
unsigned stemPairsAt(const char* p) {
  const __m128i caseBit = _mm_set1_epi8(0x20);
  const __m128i here = _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), caseBit);
  const __m128i next =
      _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 1)), caseBit);
  // Spelled out stem by stem, so that each letter is a constant the compiler folds (in a loop
  // over kStems, GCC 12 broadcasts both letters again for every block).
  auto startsOf = [&](size_t stem) {
    return _mm_and_si128(_mm_cmpeq_epi8(here, _mm_set1_epi8(kStems[stem][0])),
                         _mm_cmpeq_epi8(next, _mm_set1_epi8(kStems[stem][1])));
  };
  static_assert(kStems.size() == 7);
  const __m128i any = _mm_or_si128(
      _mm_or_si128(_mm_or_si128(startsOf(0), startsOf(1)), _mm_or_si128(startsOf(2), startsOf(3))),
      _mm_or_si128(_mm_or_si128(startsOf(4), startsOf(5)), startsOf(6)));
  return static_cast<unsigned>(_mm_movemask_epi8(any));
}
#endif

}  // namespace

bool textMayNameSecrets(std::string_view text) {
  // An escape (\u0074oken) could spell any secret word.
  if (text.find('\\') != std::string_view::npos) return true;
  // This runs on the body and the reply of every audited write. Every stem has at least three
  // letters, so the last byte starts none.
  size_t i = 0;
#if defined(__SSE2__)
  // Sixteen positions at a time, where the first two letters of a stem are; the stems' first
  // letters alone are too common in JSON keys to skip much.
  for (; i + 17 <= text.size(); i += 16) {
    for (unsigned at = stemPairsAt(text.data() + i); at != 0; at &= at - 1) {
      if (stemAt(text, i + static_cast<size_t>(__builtin_ctz(at)))) return true;
    }
  }
#endif
  for (; i + 1 < text.size(); ++i) {
    if (stemAt(text, i)) return true;
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
