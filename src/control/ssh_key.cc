#include "control/ssh_key.h"

#include <sodium.h>

#include <array>
#include <bit>
#include <cstdint>
#include <optional>

namespace allot::control {
namespace {

// The types sshd accepts that we let through; DSA (ssh-dss) is gone from OpenSSH and stays out.
constexpr std::array<std::string_view, 7> kKeyTypes = {"ssh-ed25519",
                                                       "ssh-rsa",
                                                       "ecdsa-sha2-nistp256",
                                                       "ecdsa-sha2-nistp384",
                                                       "ecdsa-sha2-nistp521",
                                                       "sk-ssh-ed25519@openssh.com",
                                                       "sk-ecdsa-sha2-nistp256@openssh.com"};

bool knownType(std::string_view t) {
  for (auto k : kKeyTypes)
    if (k == t) return true;
  return false;
}

std::string typeList() {
  std::string out;
  for (auto k : kKeyTypes) out += (out.empty() ? "" : ", ") + std::string(k);
  return out;
}

Status bad(const std::string& why) { return Status::InvalidArgument("key: " + why, "key"); }

bool isBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  auto blank = [](char c) { return isBlank(c) || c == '\r' || c == '\n'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

// Splits off the first blank-separated word of `s` (which has no leading blanks).
std::string_view nextWord(std::string_view& s) {
  size_t end = 0;
  while (end < s.size() && !isBlank(s[end])) ++end;
  std::string_view word = s.substr(0, end);
  s.remove_prefix(end);
  while (!s.empty() && isBlank(s.front())) s.remove_prefix(1);
  return word;
}

// A short, printable excerpt of user input for an error message.
std::string excerpt(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return s.size() > 40 ? out + "..." : out;
}

std::optional<std::string> base64Decode(std::string_view b64) {
  std::string bin(b64.size() / 4 * 3 + 3, '\0');
  size_t len = 0;
  // Strict: padding as OpenSSH writes it, no characters skipped.
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(bin.data()), bin.size(), b64.data(),
                        b64.size(), nullptr, &len, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0)
    return std::nullopt;
  bin.resize(len);
  return bin;
}

// Reads the SSH wire format (RFC 4251 section 5): strings and mpints are a big-endian u32 length
// and that many bytes.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}
  std::optional<std::string_view> string() {
    if (data_.size() < 4) return std::nullopt;
    uint32_t len = 0;
    for (int i = 0; i < 4; ++i) len = (len << 8) | static_cast<unsigned char>(data_[i]);
    data_.remove_prefix(4);
    if (len > data_.size()) return std::nullopt;
    std::string_view s = data_.substr(0, len);
    data_.remove_prefix(len);
    return s;
  }
  bool atEnd() const { return data_.empty(); }

 private:
  std::string_view data_;
};

// Significant bits of a non-negative mpint.
int mpintBits(std::string_view m) {
  while (!m.empty() && m.front() == '\0') m.remove_prefix(1);
  if (m.empty()) return 0;
  const auto first = static_cast<unsigned char>(m.front());
  return static_cast<int>((m.size() - 1) * 8) + (8 - std::countl_zero(first));
}

// The parts after the type, per key type (RFC 8709, RFC 4253, RFC 5656, OpenSSH PROTOCOL.u2f).
Status checkKeyBody(std::string_view type, WireReader& r) {
  if (type == "ssh-rsa") {
    auto e = r.string();
    auto n = r.string();
    if (!e || !n || !r.atEnd()) return bad("the RSA key data is malformed");
    if (int bits = mpintBits(*n); bits < kMinRsaBits)
      return bad("an RSA key of " + std::to_string(bits) + " bits is too weak; at least " +
                 std::to_string(kMinRsaBits) + " bits are required (ed25519 is better)");
    return Status::Ok();
  }
  if (type == "ssh-ed25519" || type == "sk-ssh-ed25519@openssh.com") {
    auto pk = r.string();
    if (!pk || pk->size() != 32) return bad("the ed25519 key data is malformed");
  } else {
    // ecdsa-sha2-<curve> and its security-key twin name the curve again, then the point.
    const std::string_view curve =
        type.rfind("sk-", 0) == 0 ? "nistp256" : type.substr(type.rfind('-') + 1);
    auto named = r.string();
    auto point = r.string();
    if (!named || *named != curve || !point || point->empty())
      return bad("the ECDSA key data is malformed");
  }
  if (type.rfind("sk-", 0) == 0) {
    auto application = r.string();
    if (!application) return bad("the security-key data is malformed");
  }
  if (!r.atEnd()) return bad("the key data has trailing bytes");
  return Status::Ok();
}

}  // namespace

std::string sshKeyFingerprint(std::string_view blob) {
  std::array<unsigned char, crypto_hash_sha256_BYTES> digest{};
  crypto_hash_sha256(digest.data(), reinterpret_cast<const unsigned char*>(blob.data()),
                     blob.size());
  constexpr int kVariant = sodium_base64_VARIANT_ORIGINAL_NO_PADDING;
  std::array<char, sodium_base64_ENCODED_LEN(crypto_hash_sha256_BYTES, kVariant)> b64{};
  sodium_bin2base64(b64.data(), b64.size(), digest.data(), digest.size(), kVariant);
  return std::string("SHA256:") + b64.data();
}

std::string normalizeSshFingerprint(std::string_view fingerprint) {
  if (fingerprint.rfind("SHA256:", 0) == 0) return std::string(fingerprint);
  return "SHA256:" + std::string(fingerprint);
}

Result<model::SshKey> parseSshPublicKey(std::string_view line) {
  // Said first and loudly: a private key pasted by mistake must not be taken for a bad format.
  if (line.find("-----BEGIN") != std::string_view::npos ||
      line.find("PRIVATE KEY") != std::string_view::npos)
    return bad(
        "this is a PRIVATE key; it must never be uploaded anywhere. Give the public key (the .pub "
        "file next to it)");
  if (line.find("---- BEGIN SSH2 PUBLIC KEY") != std::string_view::npos)
    return bad(
        "an RFC 4716 (PuTTY) public key; convert it to OpenSSH's format first: "
        "ssh-keygen -i -f FILE");
  if (line.size() > kMaxSshKeyBytes)
    return bad("over " + std::to_string(kMaxSshKeyBytes / 1024) +
               " KiB; one public key is far "
               "smaller");
  std::string_view rest = trim(line);
  if (rest.empty()) return bad("empty; expected one line of a .pub file: TYPE BASE64 [COMMENT]");
  for (char c : rest) {
    if (c == '\n' || c == '\r') return bad("one key at a time: the text has several lines");
    // The line is written into authorized_keys as it is: nothing that could end or bend it.
    if ((c < 0x20 && c != '\t') || c == 0x7f) return bad("control characters are not allowed");
  }
  const std::string_view type = nextWord(rest);
  if (!knownType(type)) {
    // authorized_keys allows options before the type (command="...",from=...); uploads do not.
    for (std::string_view scan = rest; !scan.empty();) {
      if (knownType(nextWord(scan)))
        return bad("options before the key type ('" + excerpt(type) +
                   "') are not accepted: keys carry no options here");
    }
    return bad("unsupported key type '" + excerpt(type) + "'; expected one of " + typeList());
  }
  const std::string_view b64 = nextWord(rest);
  if (b64.empty()) return bad("no key data after the type '" + std::string(type) + "'");
  auto blob = base64Decode(b64);
  if (!blob) return bad("the key data is not valid base64");
  WireReader reader(*blob);
  auto inner = reader.string();
  if (!inner || *inner != type)
    return bad("the key data does not hold a '" + std::string(type) + "' key");
  if (Status st = checkKeyBody(type, reader); !st.ok()) return st;

  model::SshKey key;
  key.fingerprint = sshKeyFingerprint(*blob);
  key.type = std::string(type);
  key.blob = std::string(b64);
  key.comment = std::string(rest);
  return key;
}

}  // namespace allot::control
