#pragma once
// CSRF tokens for console sessions. A browser session authenticates with its cookie, which the
// browser also sends on requests another site makes it send; such requests cannot read our
// replies, so a value only our pages learned (from the login reply) proves the request is ours.
// The value is a keyed hash (BLAKE2b) of a fixed label under the session secret: nothing more
// is stored, it survives restarts, and it reveals nothing about the secret. Thread-safe.

#include <string>
#include <string_view>

namespace allot::auth {

// Hex; 64 characters.
std::string csrfTokenFor(std::string_view sessionSecret);
// Constant-time: `presented` is the X-CSRF-Token header.
bool csrfTokenMatches(std::string_view sessionSecret, std::string_view presented);

}  // namespace allot::auth
