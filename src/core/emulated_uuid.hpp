// The UUIDs of emulated devices, "GPU-00000000-gpuf-emul-0000-00000000000N" for the emulated
// node's device N: stable across restarts, so scripts and saved grants that name emulated devices
// keep working. Header-only, so the command (which otherwise uses the public C ABI alone) reads
// them as the library writes them.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace gf {

inline constexpr char kEmulatedUuidPrefix[] = "GPU-00000000-gpuf-emul-0000-";

// The UUID of the emulated device `node_ordinal`.
inline std::string emulated_uuid(int node_ordinal) {
  char text[64];
  std::snprintf(text, sizeof text, "%s%012d", kEmulatedUuidPrefix, node_ordinal);
  return text;
}

// The node ordinal in an emulated UUID, or -1 when `uuid` is not one.
inline int emulated_ordinal(const std::string &uuid) {
  const size_t prefix = sizeof kEmulatedUuidPrefix - 1;
  if (uuid.size() != prefix + 12 || uuid.compare(0, prefix, kEmulatedUuidPrefix) != 0) return -1;
  const std::string digits = uuid.substr(prefix);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return static_cast<int>(std::strtol(digits.c_str(), nullptr, 10));
}

// How many devices an emulated node needs for each of `uuids` to name one of its devices: the
// highest ordinal + 1 (0 for none), or -1 when one of them is not an emulated UUID.
template <class Uuids>
int emulated_node_size(const Uuids &uuids) {
  int size = 0;
  for (const std::string &uuid : uuids) {
    const int ordinal = emulated_ordinal(uuid);
    if (ordinal < 0) return -1;
    size = ordinal + 1 > size ? ordinal + 1 : size;
  }
  return size;
}

}  // namespace gf
