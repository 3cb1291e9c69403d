// JSON text pieces for the documents gpuflow writes by hand (status, the dashboard's snapshots,
// the data-plane check).
#pragma once

#include <cstdio>
#include <string>

namespace gf {

// s as a JSON string literal: quotes and backslashes escaped, control characters and DEL as
// \uXXXX; other bytes as they are (names are checked UTF-8 where gpuflow takes them).
inline std::string json_quoted(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// v with every digit a double holds (round-trips exactly).
inline std::string json_number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

}  // namespace gf
