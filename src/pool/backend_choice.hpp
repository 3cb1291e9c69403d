// Which device backend a pool's options give: GF_BACKEND_AUTO takes real GPUs when there are
// any, else emulates devices on the host. Shared by embedded pools and the service.
#pragma once

#include <memory>

#include "devices/backend.hpp"
#include "pool/pool_options.hpp"

namespace gf {

std::unique_ptr<DeviceBackend> make_backend(const PoolOptions &options);

}  // namespace gf
