// Byte counts for people, in one form everywhere gpuflow prints one (the command's info, run and
// doctor lines, `gpuflow status`, document limits): powers of 1024 with their binary units, one
// decimal unless the value is whole ("512 B", "16 MiB", "1.5 GiB"). Header-only, so the command,
// which otherwise uses the public C ABI alone, prints sizes the way the library does.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace gf {

inline std::string bytes_text(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  constexpr int kLast = 5;
  int u = 0;
  while (bytes >= 1024 && u < kLast) {
    bytes /= 1024;
    ++u;
  }
  const double tenths = std::round(bytes * 10) / 10;
  char text[32];
  std::snprintf(text, sizeof text, u == 0 || tenths == std::floor(tenths) ? "%.0f %s" : "%.1f %s",
                u == 0 ? bytes : tenths, units[u]);
  return text;
}

}  // namespace gf
