#include "bytes_text.hpp"

#include <cmath>
#include <cstdio>

namespace gpuflow_cli {

std::string bytes_text(double bytes) {
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

}  // namespace gpuflow_cli
