// Text checks: every string a graph holds (names, command arguments, metadata, text literals)
// is UTF-8, so that every graph gpuflow accepts can be written as JSON as well as binary.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace gf {

// The offset of the first byte that does not belong to a well-formed UTF-8 sequence (RFC 3629:
// shortest form, no surrogates, at most U+10FFFF), or npos when `s` is valid. Linear time.
inline size_t utf8_error_at(std::string_view s) {
  const auto *p = reinterpret_cast<const unsigned char *>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1fu, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0fu, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07u, min = 0x10000;
    } else {
      return i;
    }
    if (n - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return std::string_view::npos;
}

// "is not valid UTF-8 (byte 3 is 0xff)" for messages; `at` from utf8_error_at.
inline std::string utf8_complaint(std::string_view s, size_t at) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x",
                static_cast<unsigned>(static_cast<unsigned char>(s[at])));
  return "is not valid UTF-8 (byte " + std::to_string(at) + " is " + hex + ")";
}

}  // namespace gf
