// RFC 4648 base64 (standard alphabet, '=' padding), for binary literals in JSON documents.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gf::serialize {

inline std::string base64_encode(const unsigned char *p, uint64_t n) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve(static_cast<size_t>((n + 2) / 3 * 4));
  uint64_t i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = uint32_t{p[i]} << 16 | uint32_t{p[i + 1]} << 8 | p[i + 2];
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (n - i == 1) {
    uint32_t v = uint32_t{p[i]} << 16;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (n - i == 2) {
    uint32_t v = uint32_t{p[i]} << 16 | uint32_t{p[i + 1]} << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

// The number of bytes `text` decodes to (0 when its length is not a multiple of 4).
inline uint64_t base64_decoded_size(std::string_view text) {
  if (text.size() % 4 != 0) return 0;
  uint64_t n = text.size() / 4 * 3;
  if (!text.empty() && text.back() == '=') --n;
  if (text.size() >= 2 && text[text.size() - 2] == '=') --n;
  return n;
}

// Decodes strict base64 into `out` (resized to the decoded size). Returns the offset of the first
// character that is wrong (not in the alphabet, padding anywhere but at the end, a length that is
// not a multiple of 4, or non-zero bits in the padded tail), or npos.
inline size_t base64_decode(std::string_view text, std::string &out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) return text.size();
  out.resize(static_cast<size_t>(base64_decoded_size(text)));
  size_t o = 0;
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int pad = 0;
    if (last && text[i + 3] == '=') pad = text[i + 2] == '=' ? 2 : 1;
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      int d = k < 4 - static_cast<size_t>(pad) ? value(text[i + k]) : 0;
      if (d < 0) return i + k;
      v = v << 6 | static_cast<uint32_t>(d);
    }
    if ((pad == 1 && (v & 0xff) != 0) || (pad == 2 && (v & 0xffff) != 0)) return i + 2;
    out[o++] = static_cast<char>(v >> 16);
    if (pad < 2) out[o++] = static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out[o++] = static_cast<char>(v & 0xff);
  }
  return std::string_view::npos;
}

}  // namespace gf::serialize
