#pragma once
// Secrets: random tokens and their stored form. A token is shown once; only its hash is kept.
// Tokens carry 256 bits of entropy, so a fast keyed-free hash (BLAKE2b) is the right stored form;
// slow password hashing (Argon2id) is for human passwords, which come with the identity issue.

#include <string>
#include <string_view>

namespace allot {

// Must be called once before any other function here (sodium_init); safe to call again.
void initSecrets();
// "<prefix>_<43 url-safe base64 chars>".
std::string newToken(std::string_view prefix);
// Hex BLAKE2b-256 of the token.
std::string hashToken(std::string_view token);
// Constant-time comparison of two equal-length hex hashes.
bool hashesEqual(std::string_view a, std::string_view b);
// Standard base64 (RFC 4648, padded) of `bytes`.
std::string toBase64(std::string_view bytes);

}  // namespace allot
