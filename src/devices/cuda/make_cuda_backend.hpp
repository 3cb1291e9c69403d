// The one entry into the CUDA backend from the rest of the runtime, so nothing else depends on
// whether gpuflow was built with CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "devices/backend.hpp"
#include "devices/visible_devices.hpp"

namespace gf {

// What a CUDA backend is asked to drive; the pool fills it from its options.
struct CudaBackendConfig {
  // The devices handed down (devices/visible_devices.hpp). CUDA_VISIBLE_DEVICES the runtime has
  // applied already: it is checked, not applied again; another list picks among what CUDA shows.
  HandedDown handed_down;
  std::vector<int> devices;   // among those, the ones to use, in this order; empty: all of them
  uint64_t memory_limit = 0;  // the pool's share of each device; 0: 95 % of its free memory
};

// A backend over the real GPUs `config` selects, or nullptr with `why` explaining in words a
// person acts on: "this build of gpuflow has no CUDA backend", or "no usable GPU: " and the cause
// (no GPU found, the NVIDIA driver is missing or too old, CUDA_VISIBLE_DEVICES is -1 or empty, the
// CUDA backend could not start), then CUDA's own error in parentheses. Throws gf::Error when the
// list handed down names a device CUDA does not show.
std::unique_ptr<DeviceBackend> make_cuda_backend(const CudaBackendConfig &config, std::string &why);

}  // namespace gf
