// Text someone else chose (process, lease and user names; messages that quote them) on its way to
// a terminal or a log line. Such text may hold escape sequences that retitle or clear an
// administrator's terminal, a carriage return that overwrites what a line said, a newline that
// forges a log line, or bidirectional controls that reorder what is shown; all of them are shown
// as visible escapes instead. JSON output escapes on its own (json_text.hpp).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "core/utf8.hpp"

namespace gf {

// Whether a terminal acts on code point `cp` rather than showing it, or lets it reorder or break
// the text around it: C0 controls, DEL, C1 controls, the bidirectional controls (marks,
// embeddings, overrides, isolates), the line and paragraph separators.
inline bool is_display_control(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

// `s` with what a terminal or log would act on (is_display_control) written out: C0 controls
// and DEL as \t, \n, \r or \xNN, the others as \uNNNN; bytes that are not UTF-8 as \xNN; and
// the backslash itself as \\, so an escape in the output always means the character was there.
// Printable characters, non-ASCII ones included, pass as they are.
inline std::string escaped_for_display(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  char hex[16];
  auto byte_escape = [&](unsigned char c) {
    std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(c));
    out += hex;
  };
  for (size_t i = 0; i < s.size();) {
    const Utf8Step step = utf8_step(s, i);
    if (!step.valid) {
      for (size_t k = 0; k < step.length; ++k) byte_escape(static_cast<unsigned char>(s[i + k]));
      i += step.length;
      continue;
    }
    const uint32_t cp = step.code_point;
    if (cp == '\\') {
      out += "\\\\";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (is_display_control(cp) && cp <= 0x7f) {
      byte_escape(static_cast<unsigned char>(cp));
    } else if (is_display_control(cp)) {
      std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(cp));
      out += hex;
    } else {
      out.append(s.substr(i, step.length));
    }
    i += step.length;
  }
  return out;
}

}  // namespace gf
