// What a kernel name may be: 1..255 characters from [A-Za-z0-9_.:/-].
#pragma once

#include <string_view>

namespace gf {

inline constexpr size_t kMaxKernelName = 255;

inline bool valid_kernel_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxKernelName) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == ':' || c == '/' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace gf
