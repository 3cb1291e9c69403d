// Versioned structs at the boundary. Every struct starts with struct_size and fields are only
// ever appended, so each struct has a list of published sizes (layouts.hpp): every size a
// release of the library has ever published for it. Inputs of any published size are read as
// far as the caller's struct goes, with defaults for the rest; outputs are written only as far as
// the caller's struct goes. Any other size is an error naming the struct.
#pragma once

#include <cstring>
#include <string>

#include "capi/layouts.hpp"
#include "core/error.hpp"

namespace gf::capi {

// The caller's struct_size, checked against the published sizes of T.
template <class T>
uint32_t checked_size(const T *in, const char *name) {
  if (!in) fail(GF_ERR_INVALID_ARGUMENT, std::string(name) + " pointer is NULL");
  uint32_t size = in->struct_size;
  for (uint32_t known : Layout<T>::kSizes) {
    if (size == known) return size;
  }
  std::string accepted;
  for (uint32_t known : Layout<T>::kSizes) {
    accepted += (accepted.empty() ? "" : " or ") + std::to_string(known);
  }
  fail(GF_ERR_STRUCT_SIZE, std::string("struct ") + name + " has struct_size " +
                               std::to_string(size) + "; this library expects " + accepted +
                               " (use the " + name + " INIT macro or init function)");
}

// A checked copy of an input struct of any published size: the caller's fields, then defaults
// (the INIT macro's values) for the fields its layout does not have. struct_size is today's.
template <class T>
T read_struct(const T *in, const char *name) {
  uint32_t size = checked_size(in, name);
  T out = Layout<T>::defaults();
  std::memcpy(static_cast<void *>(&out), in, size);
  out.struct_size = sizeof(T);
  return out;
}

// Writes `value` into the caller's output struct *out, as far as its published struct_size goes;
// out->struct_size is left as the caller set it.
template <class T>
void write_struct(T *out, const T &value, const char *name) {
  uint32_t size = checked_size(out, name);
  T copy = value;
  copy.struct_size = size;
  std::memcpy(static_cast<void *>(out), &copy, size);
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
