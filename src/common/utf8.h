#pragma once
// UTF-8 at the edges. Every string Allot stores is JSON text in the end (the store's documents,
// the audit log, the API's replies), and JSON text is UTF-8: a string that is not would make a
// durable write fail. So strings are checked where they come in (path and query parameters,
// agents' reports) and cut only at character boundaries where Allot shortens one itself.

#include <cstddef>
#include <string>
#include <string_view>

namespace allot {

// Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
bool isValidUtf8(std::string_view s);

// The longest prefix of s of at most maxBytes bytes that ends on a character boundary (s is
// taken to be valid UTF-8).
std::string cutUtf8(std::string_view s, size_t maxBytes);

}  // namespace allot
