// Versioned structs at the boundary. Every struct starts with struct_size; this library knows
// one size per struct (fields are only ever appended, so older sizes become valid later), and
// any other size is an error naming the struct.
#pragma once

#include <cstring>
#include <string>

#include "core/error.hpp"

namespace gf::capi {

template <class T>
void check_struct_size(const T *in, const char *name) {
  if (!in) fail(GF_ERR_INVALID_ARGUMENT, std::string(name) + " pointer is NULL");
  if (in->struct_size != sizeof(T)) {
    fail(GF_ERR_STRUCT_SIZE, std::string("struct ") + name + " has struct_size " +
                                 std::to_string(in->struct_size) + "; this library expects " +
                                 std::to_string(sizeof(T)) + " (use the " + name +
                                 " INIT macro or init function)");
  }
}

// A copy of an input struct, checked.
template <class T>
T read_struct(const T *in, const char *name) {
  check_struct_size(in, name);
  T out;
  std::memcpy(&out, in, sizeof(T));
  return out;
}

// Writes the first min(size, sizeof(T)) bytes of `init` into *out, recording that size: the
// gf_*_init functions never write past a struct of an older, smaller layout.
template <class T>
void init_bounded(T *out, const T &init, uint32_t size) {
  if (!out || size < sizeof(uint32_t)) return;
  uint32_t n = size < sizeof(T) ? size : static_cast<uint32_t>(sizeof(T));
  T copy = init;
  copy.struct_size = n;
  std::memcpy(static_cast<void *>(out), &copy, n);
}

}  // namespace gf::capi
