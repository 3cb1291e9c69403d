// The one entry into the CUDA backend from the rest of the runtime, so nothing else depends on
// whether gpuflow was built with CUDA.
#pragma once

#include <memory>
#include <string>

#include "devices/backend.hpp"
#include "pool/pool_options.hpp"

namespace gf {

// A backend over the real GPUs the options select, or nullptr with `why` explaining (no CUDA in
// this build, no driver, no device, a device that failed to initialise).
std::unique_ptr<DeviceBackend> make_cuda_backend(const PoolOptions &options, std::string &why);

}  // namespace gf
