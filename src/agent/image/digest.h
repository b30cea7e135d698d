#pragma once
// sha256 digests as OCI writes them: 64 lower-case hex digits (after "sha256:").

#include <string>
#include <string_view>

namespace allot::agent {

std::string lowerHex(const unsigned char* bytes, size_t n);
// The sha256 of `bytes`, as 64 lower-case hex digits.
std::string sha256Hex(std::string_view bytes);

}  // namespace allot::agent
