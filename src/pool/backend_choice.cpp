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
    // `why` is already a sentence a person can act on ("no usable GPU: no GPU found (...)"):
    // callers show it as it stands.
    if (options.backend == GF_BACKEND_CUDA) fail(GF_ERR_NOT_FOUND, why);
  }
  return std::make_unique<HostBackend>(options.host);
}

}  // namespace gf
