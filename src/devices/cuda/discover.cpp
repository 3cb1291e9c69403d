// Finding the GPUs a CUDA pool will drive.
#ifdef GPUFLOW_HAVE_CUDA

#include <cuda_runtime.h>

#include <cstdlib>

#include "devices/cuda/cuda_backend.hpp"
#include "devices/cuda/cuda_check.hpp"
#include "devices/cuda/make_cuda_backend.hpp"

namespace gf {

std::unique_ptr<DeviceBackend> make_cuda_backend(const CudaBackendConfig &config,
                                                 std::string &why) {
  // Number devices as nvidia-smi does (PCI bus order) unless the caller chose an order already;
  // this must happen before the runtime initialises. CUDA_VISIBLE_DEVICES is honoured by it.
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
  int count = 0;  // left untouched when there is no driver
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    why = e != cudaSuccess ? "no CUDA device is usable (" + cuda_message(e) + ")"
                           : std::string("no CUDA device is visible");
    return nullptr;
  }
  std::vector<int> ordinals;
  if (config.devices.empty()) {
    for (int i = 0; i < count; ++i) ordinals.push_back(i);
  } else {
    for (int d : config.devices) {
      if (d >= count) {
        fail(GF_ERR_INVALID_ARGUMENT, "gf_pool_config.devices names device " + std::to_string(d) +
                                          ", but only " + std::to_string(count) +
                                          " CUDA devices are visible");
      }
      ordinals.push_back(d);
    }
  }
  return std::make_unique<CudaBackend>(config, std::move(ordinals));
}

}  // namespace gf

#endif  // GPUFLOW_HAVE_CUDA
