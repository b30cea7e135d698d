#pragma once
// A byte as two lowercase hex digits, the way escapes (\xNN, \u00NN, LDAP filters' \NN) and
// digests spell it. `Out` is anything with push_back(char): a std::string, a fmt buffer.

namespace allot {

template <typename Out>
void appendHexByte(Out& out, unsigned char byte) {
  static constexpr char kDigits[] = "0123456789abcdef";
  out.push_back(kDigits[byte >> 4]);
  out.push_back(kDigits[byte & 0xf]);
}

}  // namespace allot
