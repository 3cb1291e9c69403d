#include "graph/cost_key.hpp"

#include <cstdint>

namespace gf {

std::string_view cost_key_prefix(std::string_view name) {
  size_t begin = 0;
  while (begin < name.size()) {
    char c = name[begin];
    if (c != '(' && c != '[' && c != '\'' && c != '"' && c != '_' && c != ' ') break;
    ++begin;
  }
  size_t end = begin;
  while (end < name.size()) {
    auto c = static_cast<unsigned char>(name[end]);
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
    if (!letter) break;
    ++end;
  }
  return name.substr(begin, end - begin);
}

bool valid_cost_key(std::string_view key) {
  if (key.empty() || key.size() > kMaxCostKey) return false;
  size_t i = 0;
  while (i < key.size()) {
    auto c = static_cast<unsigned char>(key[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++i;
      continue;
    }
    // A multi-byte sequence: lead byte, continuation bytes, no overlong forms, no surrogates,
    // at most U+10FFFF.
    size_t n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
      n = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n > key.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      auto cc = static_cast<unsigned char>(key[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp < 0xa0)) {
      return false;
    }
    i += n;
  }
  return true;
}

}  // namespace gf
