// JSON text pieces for the documents gpuflow writes by hand (status, the dashboard's snapshots,
// the data-plane check).
#pragma once

#include <cstdio>
#include <string>

#include "core/display_text.hpp"
#include "core/utf8.hpp"

namespace gf {

// s as a JSON string literal: quotes and backslashes escaped, and what a terminal would act on
// (is_display_control: control characters, DEL, C1 and bidirectional controls, the line and
// paragraph separators) as \uXXXX, so the JSON is as safe to print as the status table; other
// bytes as they are (names are checked UTF-8 where gpuflow takes them).
inline std::string json_quoted(const std::string &s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const Utf8Step step = utf8_step(s, i);
    const uint32_t cp = step.code_point;
    if (step.valid && (cp == '"' || cp == '\\')) {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (step.valid && is_display_control(cp)) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(cp & 0xffff));
      out += escaped;
    } else {
      out.append(s, i, step.length);
    }
    i += step.length;
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
