#include "common/bounded_json.h"

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

}  // namespace allot
