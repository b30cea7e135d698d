#pragma once
// Reading JSON that someone else wrote (a request body, an agent's message, a user's Jupyter
// server's reply, allotd's reply to the CLI) with a bound on nesting. nlohmann's parser is
// iterative, but much of what follows a parse is not: dump(), the audit log's redaction, the
// comparisons and copies of a document recurse once per level, so 100,000 nested '[' in a 1 MiB
// body would overflow the stack of whoever touches the value. Every reader of foreign JSON goes
// through parseBoundedJson; a document nested deeper than kMaxJsonDepth reads as malformed.

#include <nlohmann/json.hpp>
#include <string_view>

namespace allot {

// Far above any document Allot or Jupyter writes (the deepest is about 8), far below what
// exhausts a stack.
inline constexpr int kMaxJsonDepth = 64;

// Whether no array or object in `text` is nested deeper than maxDepth (brackets inside strings
// do not count). One pass, no allocation: cheap enough to run before every parse.
bool jsonNestingWithin(std::string_view text, int maxDepth = kMaxJsonDepth);

// Whether every number in `doc` that is not an integer is finite and within ±2^31. Decoders read
// numbers into int and int64_t fields with nlohmann's get<>, which turns a fraction into an
// integer by a cast: undefined behaviour for one past the target's range (1e30 as a job id). A
// decoder of foreign messages checks this first; no fraction Allot exchanges comes near the
// bound (telemetry's percentages, degrees and watts are the only ones).
bool fractionsWithinIntRange(const nlohmann::json& doc);

// The document, or a discarded value (is_discarded()) when it is malformed or nested too deep.
// Never throws. Json: nlohmann::json, or nlohmann::ordered_json to keep the keys' order (the CLI
// prints documents as they came).
template <typename Json = nlohmann::json>
Json parseBoundedJson(std::string_view text) {
  if (!jsonNestingWithin(text)) return Json(Json::value_t::discarded);
  return Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

}  // namespace allot
