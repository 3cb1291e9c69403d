// gf_pool_config as the library reads it: every published layout is accepted (0.1 ended
// before `endpoint`), and the fields an older caller lacks take their defaults.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "gpuflow.h"

namespace gf::capi {

inline gf_pool_config pool_config_defaults() {
  gf_pool_config c = GF_POOL_CONFIG_INIT;
  return c;
}

inline gf_pool_config read_pool_config(const gf_pool_config *in) {
  if (!in) fail(GF_ERR_INVALID_ARGUMENT, "gf_pool_config pointer is NULL");
  constexpr uint32_t kLayout01 = offsetof(gf_pool_config, endpoint);
  if (in->struct_size != sizeof(gf_pool_config) && in->struct_size != kLayout01) {
    fail(GF_ERR_STRUCT_SIZE,
         "struct gf_pool_config has struct_size " + std::to_string(in->struct_size) +
             "; this library accepts " + std::to_string(sizeof(gf_pool_config)) + " or " +
             std::to_string(kLayout01) + " (0.1) (use GF_POOL_CONFIG_INIT or gf_pool_config_init)");
  }
  gf_pool_config out = pool_config_defaults();
  std::memcpy(static_cast<void *>(&out), in, in->struct_size);
  return out;
}

}  // namespace gf::capi
