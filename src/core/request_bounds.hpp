// The bounds of what a client may send the service, one set for both ends. gpuflow.h states
// them (GF_MAX_*, "Shared pools"); the C shims check a caller's structs against them before
// anything is sent, and the service checks every request against the same numbers, refusing a
// request past one with an answer for that request only. Each check returns "" or what is wrong,
// naming the field and the bound as the header spells it:
//   "gf_lease_request.name is 5000 bytes; at most GF_MAX_LEASE_NAME_BYTES (4096)".
#pragma once

#include <sys/un.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/utf8.hpp"
#include "gpuflow.h"

namespace gf::bounds {

constexpr size_t kMaxLeaseNameBytes = GF_MAX_LEASE_NAME_BYTES;
constexpr size_t kMaxLeaseDevices = GF_MAX_LEASE_DEVICES;
constexpr size_t kMaxSocketPathBytes = GF_MAX_SOCKET_PATH_BYTES;
constexpr size_t kMaxPathBytes = GF_MAX_PATH_BYTES;
constexpr size_t kMaxTokenBytes = GF_MAX_TOKEN_BYTES;
// A token file holds one line; a file far longer than any token is not a token file.
constexpr size_t kMaxTokenFileBytes = 64u << 10;

// A socket path of GF_MAX_SOCKET_PATH_BYTES and its NUL are exactly what sockaddr_un holds.
static_assert(kMaxSocketPathBytes + 1 == sizeof(sockaddr_un{}.sun_path),
              "GF_MAX_SOCKET_PATH_BYTES must be sockaddr_un's sun_path less its NUL");

// "FIELD is SIZE bytes; at most NAME (BOUND)" when size > bound, else "".
inline std::string bytes_over(std::string_view field, size_t size, std::string_view bound_name,
                              size_t bound) {
  if (size <= bound) return {};
  return std::string(field) + " is " + std::to_string(size) + " bytes; at most " +
         std::string(bound_name) + " (" + std::to_string(bound) + ")";
}

// Text the service keeps and shows: at most `bound` bytes of UTF-8.
inline std::string text_problem(std::string_view field, std::string_view text,
                                std::string_view bound_name, size_t bound) {
  if (std::string why = bytes_over(field, text.size(), bound_name, bound); !why.empty()) return why;
  if (const size_t at = utf8_error_at(text); at != std::string_view::npos) {
    return std::string(field) + " " + utf8_complaint(text, at);
  }
  return {};
}

// A lease request's name (gf_lease_request.name, LeaseRequest.name).
inline std::string lease_name_problem(std::string_view field, std::string_view name) {
  return text_problem(field, name, "GF_MAX_LEASE_NAME_BYTES", kMaxLeaseNameBytes);
}

// A lease request's device list: at most GF_MAX_LEASE_DEVICES ordinals, none twice.
inline std::string lease_devices_problem(std::string_view field, const int32_t *devices,
                                         size_t count) {
  if (count > kMaxLeaseDevices) {
    return std::string(field) + " lists " + std::to_string(count) +
           " devices; at most GF_MAX_LEASE_DEVICES (" + std::to_string(kMaxLeaseDevices) + ")";
  }
  std::vector<std::pair<int32_t, size_t>> sorted;  // (ordinal, entry)
  sorted.reserve(count);
  for (size_t i = 0; i < count; ++i) sorted.emplace_back(devices[i], i);
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i].first == sorted[i - 1].first) {
      return std::string(field) + " lists device " + std::to_string(sorted[i].first) +
             " twice (entries " + std::to_string(sorted[i - 1].second) + " and " +
             std::to_string(sorted[i].second) + "); each ordinal at most once";
    }
  }
  return {};
}

}  // namespace gf::bounds
