#include "common/bounded_json.h"

#include <cmath>
#include <vector>

namespace allot {

bool jsonNestingWithin(std::string_view text, int maxDepth) {
  int depth = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    switch (c) {
      case '"':
        inString = true;
        break;
      case '[':
      case '{':
        if (++depth > maxDepth) return false;
        break;
      case ']':
      case '}':
        --depth;  // unbalanced text is the parser's to reject
        break;
      default:
        break;
    }
  }
  return true;
}

bool fractionsWithinIntRange(const nlohmann::json& doc) {
  constexpr double kBound = 2147483648.0;  // 2^31
  // Iterative: the document may come from anywhere in the process, nested as deep as it likes.
  std::vector<const nlohmann::json*> pending = {&doc};
  while (!pending.empty()) {
    const nlohmann::json* j = pending.back();
    pending.pop_back();
    if (j->is_number_float()) {
      const double v = j->get<double>();
      if (!std::isfinite(v) || v <= -kBound || v >= kBound) return false;
    } else if (j->is_structured()) {
      for (const auto& child : *j) pending.push_back(&child);
    }
  }
  return true;
}

}  // namespace allot
