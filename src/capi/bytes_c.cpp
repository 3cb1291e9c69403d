// C shims: gf_bytes, the buffers the library hands its caller.
#include <cstdlib>
#include <cstring>
#include <new>

#include "capi/bytes.hpp"

namespace gf::capi {

void give_bytes(gf_bytes *out, std::string_view bytes) {
  void *data = std::malloc(bytes.size() + 1);
  if (!data) throw std::bad_alloc();
  std::memcpy(data, bytes.data(), bytes.size());
  static_cast<char *>(data)[bytes.size()] = '\0';
  out->data = data;
  out->size = bytes.size();
}

}  // namespace gf::capi

extern "C" {

GF_API void gf_bytes_free(gf_bytes *bytes) {
  if (!bytes) return;
  std::free(bytes->data);
  bytes->data = nullptr;
  bytes->size = 0;
}

}  // extern "C"
