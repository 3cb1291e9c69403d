#include "pool/backend_choice.hpp"

#include "core/error.hpp"
#include "devices/cuda/make_cuda_backend.hpp"
#include "devices/host/host_backend.hpp"

namespace gf {

// GF_BACKEND_AUTO takes real GPUs when there are any, else emulates devices on the host.
std::unique_ptr<DeviceBackend> make_backend(const PoolOptions &options) {
  if (options.backend != GF_BACKEND_HOST) {
    std::string why;
    if (auto cuda = make_cuda_backend(options.cuda, why)) return cuda;
    if (options.backend == GF_BACKEND_CUDA) {
      fail(GF_ERR_NOT_FOUND, "gf_pool_config.backend is GF_BACKEND_CUDA, but " + why);
    }
  }
  return std::make_unique<HostBackend>(options.host);
}

}  // namespace gf
