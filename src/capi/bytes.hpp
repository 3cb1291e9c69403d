// Bytes the library hands the caller (gf_bytes): allocated here with malloc, released by the
// caller with gf_bytes_free (bytes_c.cpp, beside this helper's definition).
#pragma once

#include <string_view>

#include "gpuflow.h"

namespace gf::capi {

// Sets *out to a copy of `bytes` followed by a NUL (so text can be read as a C string; the NUL is
// not counted in out->size). Throws std::bad_alloc when memory is short.
void give_bytes(gf_bytes *out, std::string_view bytes);

}  // namespace gf::capi
