// Finding the GPUs a CUDA pool will drive.
#ifdef GPUFLOW_HAVE_CUDA

#include <cuda_runtime.h>

#include <cstdlib>

#include "devices/cuda/cuda_backend.hpp"
#include "devices/cuda/cuda_check.hpp"
#include "devices/cuda/make_cuda_backend.hpp"

namespace gf {

namespace {

// Why no GPU can be used, in words a person acts on, classified here where the error code is
// known: callers (the gpuflow command among them) print it as it stands.
std::string no_usable_gpu(cudaError_t e) {
  const std::string detail = e == cudaSuccess ? "no CUDA device is visible" : cuda_message(e);
  const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string words;
  if (visible && (*visible == '\0' || std::string(visible) == "-1")) {
    words = std::string("CUDA_VISIBLE_DEVICES is ") + (*visible ? "-1" : "set but empty");
  } else {
    switch (e) {
      case cudaSuccess:  // no error, but no device either
      case cudaErrorNoDevice:
        words = "no GPU found";
        break;
      case cudaErrorInsufficientDriver:
      case cudaErrorStubLibrary:
      case cudaErrorCallRequiresNewerDriver:
      case cudaErrorSystemDriverMismatch:
        words = "the NVIDIA driver is missing or too old";
        break;
      default:
        words = "the CUDA backend could not start";
        break;
    }
  }
  return "no usable GPU: " + words + " (" + detail + ")";
}

}  // namespace

std::unique_ptr<DeviceBackend> make_cuda_backend(const CudaBackendConfig &config,
                                                 std::string &why) {
  // Number devices as nvidia-smi does (PCI bus order) unless the caller chose an order already;
  // this must happen before the runtime initialises. CUDA_VISIBLE_DEVICES is honoured by it.
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
  int count = 0;  // left untouched when there is no driver
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    why = no_usable_gpu(e);
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
