// The one entry into the CUDA backend from the rest of the runtime, so nothing else depends on
// whether gpuflow was built with CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "devices/backend.hpp"

namespace gf {

// What a CUDA backend is asked to drive; the pool fills it from its options.
struct CudaBackendConfig {
  std::vector<int> devices;   // CUDA ordinals to use, in this order; empty: all visible ones
  uint64_t memory_limit = 0;  // the pool's share of each device; 0: 95 % of its free memory
};

// A backend over the real GPUs `config` selects, or nullptr with `why` explaining in words a
// person acts on: "this build of gpuflow has no CUDA backend", or "no usable GPU: " and the cause
// (no GPU found, the NVIDIA driver is missing or too old, CUDA_VISIBLE_DEVICES is -1 or empty, the
// CUDA backend could not start), then CUDA's own error in parentheses.
std::unique_ptr<DeviceBackend> make_cuda_backend(const CudaBackendConfig &config, std::string &why);

}  // namespace gf
