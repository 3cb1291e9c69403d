// Text checks: every string a graph holds (names, command arguments, metadata, text literals)
// is UTF-8, so that every graph gpuflow accepts can be written as JSON as well as binary. Names
// gpuflow does not choose itself (a process's name, what an older client sends) are made UTF-8
// here rather than refused: utf8_repaired, utf8_fitted.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace gf {

// One step of decoding: the sequence starting at some offset.
struct Utf8Step {
  size_t length = 0;        // bytes of the sequence, or of its maximal ill-formed part
  bool valid = false;       // a well-formed character of `length` bytes
  bool cut_short = false;   // ill-formed only because the text ended inside it
  uint32_t code_point = 0;  // when valid
};

// Decodes the sequence at s[i] (i < s.size()) as RFC 3629 and Unicode's table 3-7 define UTF-8:
// shortest form, no surrogates, at most U+10FFFF. An ill-formed sequence's length is its maximal
// subpart (the lead byte and the continuation bytes that could still have completed it), at
// least 1: what one U+FFFD replaces, as the WHATWG decoder does.
inline Utf8Step utf8_step(std::string_view s, size_t i) {
  const auto *p = reinterpret_cast<const unsigned char *>(s.data());
  const unsigned char c = p[i];
  if (c < 0x80) return {1, true, false, c};
  size_t len;
  unsigned char low = 0x80, high = 0xbf;  // the range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0) low = 0xa0;   // no overlong forms
    if (c == 0xed) high = 0x9f;  // no surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0) low = 0x90;   // no overlong forms
    if (c == 0xf4) high = 0x8f;  // nothing above U+10FFFF
  } else {
    return {1, false, false, 0};  // a continuation byte, C0, C1 or F5..FF: never a lead byte
  }
  uint32_t cp = c & (len == 2 ? 0x1fu : len == 3 ? 0x0fu : 0x07u);
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return {k, false, true, 0};
    const unsigned char b = p[i + k];
    const bool fits = k == 1 ? b >= low && b <= high : (b & 0xc0) == 0x80;
    if (!fits) return {k, false, false, 0};
    cp = (cp << 6) | (b & 0x3fu);
  }
  return {len, true, false, cp};
}

// The offset of the first byte that does not belong to a well-formed UTF-8 sequence, or npos
// when `s` is valid. Linear time.
inline size_t utf8_error_at(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const Utf8Step step = utf8_step(s, i);
    if (!step.valid) return i;
    i += step.length;
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

// `s` as valid UTF-8: each ill-formed part becomes U+FFFD, except one that the end of `s` cut
// short, which is dropped (a name cut mid-character, as the kernel cuts /proc/self/comm at 15
// bytes, keeps its whole characters and loses the piece).
inline std::string utf8_repaired(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Utf8Step step = utf8_step(s, i);
    if (step.valid) {
      out.append(s.substr(i, step.length));
    } else if (!step.cut_short) {
      out += "\xef\xbf\xbd";  // U+FFFD REPLACEMENT CHARACTER
    }
    i += step.length;
  }
  return out;
}

// The longest prefix of valid UTF-8 `s` that has at most `max_bytes` bytes and ends at a
// character boundary.
inline std::string_view utf8_prefix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
  return s.substr(0, cut);
}

// Any bytes as valid UTF-8 of at most `max_bytes` bytes: repaired, then cut at a character
// boundary. For names gpuflow takes as they come instead of refusing them.
inline std::string utf8_fitted(std::string_view s, size_t max_bytes) {
  return std::string(utf8_prefix(utf8_repaired(s), max_bytes));
}

// Valid UTF-8 `s` in at most `max_bytes` bytes (max_bytes >= 3): as it is when it fits, else cut
// at a character boundary and ended with "…" (U+2026), so a reader sees that more was there.
inline std::string utf8_abbreviated(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return std::string(s);
  static constexpr std::string_view kEllipsis = "\xe2\x80\xa6";
  return std::string(utf8_prefix(s, max_bytes - kEllipsis.size())) + std::string(kEllipsis);
}

}  // namespace gf
