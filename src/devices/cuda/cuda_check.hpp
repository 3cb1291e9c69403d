// CUDA runtime errors as gf::Error, with CUDA's own message and what gpuflow was doing.
#pragma once

#ifdef GPUFLOW_HAVE_CUDA

#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"

namespace gf {

inline std::string cuda_message(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

inline void cuda_check(cudaError_t error, const char *what) {
  if (error != cudaSuccess)
    fail(GF_ERR_SYSTEM, std::string(what) + " failed: " + cuda_message(error));
}

}  // namespace gf

#endif
