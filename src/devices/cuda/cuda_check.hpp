// CUDA runtime errors as gf::Error, with CUDA's own message and what gpuflow was doing.
#pragma once

#ifdef GPUFLOW_HAVE_CUDA

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "core/error.hpp"

namespace gf {

inline std::string cuda_message(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

// "GPU-…" as nvidia-smi prints it.
inline std::string uuid_text(const cudaUUID_t &uuid) {
  const auto *b = reinterpret_cast<const unsigned char *>(uuid.bytes);
  char text[64];
  std::snprintf(text, sizeof text,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return text;
}

inline void cuda_check(cudaError_t error, const char *what) {
  if (error != cudaSuccess)
    fail(GF_ERR_SYSTEM, std::string(what) + " failed: " + cuda_message(error));
}

}  // namespace gf

#endif
