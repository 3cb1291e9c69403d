// Built when gpuflow is compiled without the CUDA toolkit.
#include "devices/cuda/make_cuda_backend.hpp"

#ifndef GPUFLOW_HAVE_CUDA
namespace gf {

std::unique_ptr<DeviceBackend> make_cuda_backend(const CudaBackendConfig &, std::string &why) {
  why = "this build of gpuflow has no CUDA backend";
  return nullptr;
}

}  // namespace gf
#endif
