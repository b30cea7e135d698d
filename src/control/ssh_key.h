#pragma once
// Reading and checking one OpenSSH public key line (`ssh-ed25519 AAAA... alice@laptop`), as a
// user uploads it to reach their sessions over SSH. Pure functions, no I/O; any thread.
//
// The key ends up verbatim in an authorized_keys file that sshd reads as root, so what is accepted
// is deliberately narrow: one key, no options, a known type, a blob that decodes and names the
// same type, and RSA keys of at least 2048 bits.

#include <string>
#include <string_view>

#include "common/status.h"
#include "model/model.h"

namespace allot::control {

// The longest key line accepted; the largest real keys (RSA 16384) are about 2.8 KiB.
inline constexpr size_t kMaxSshKeyBytes = 16 * 1024;
// The smallest RSA modulus accepted, in bits.
inline constexpr int kMinRsaBits = 2048;

// Parses `line` (surrounding whitespace and one trailing newline allowed). The key's addedAt is
// left 0. Errors are InvalidArgument naming the field `key`, and say what is wrong.
Result<model::SshKey> parseSshPublicKey(std::string_view line);

// "SHA256:" + unpadded base64 of SHA-256 over the decoded key blob, as `ssh-keygen -l` prints it.
std::string sshKeyFingerprint(std::string_view blob);

// A fingerprint as a user may type it: with or without the "SHA256:" prefix.
std::string normalizeSshFingerprint(std::string_view fingerprint);

}  // namespace allot::control
