// Worker addresses as text, for the relay's pipes (tools/relay).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace gf::transport {

inline std::string to_hex(const std::vector<uint8_t> &bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  text.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    text += digits[b >> 4];
    text += digits[b & 15];
  }
  return text;
}

// Throws gf::Error (GF_ERR_INVALID_ARGUMENT) on anything but an even number of hex digits.
inline std::vector<uint8_t> from_hex(const std::string &text) {
  auto digit = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    fail(GF_ERR_INVALID_ARGUMENT, "'" + text.substr(0, 32) + "…' is not a hex address");
  };
  if (text.size() % 2 != 0) fail(GF_ERR_INVALID_ARGUMENT, "a hex address has an even length");
  std::vector<uint8_t> bytes(text.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<uint8_t>(digit(text[2 * i]) << 4 | digit(text[2 * i + 1]));
  }
  return bytes;
}

}  // namespace gf::transport
