// Finding the GPUs a CUDA pool will drive.
#ifdef GPUFLOW_HAVE_CUDA

#include <cuda_runtime.h>

#include <cstdlib>
#include <string>
#include <vector>

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
  } else if (visible && e == cudaErrorNoDevice) {
    words = std::string("CUDA_VISIBLE_DEVICES='") + visible +
            "' names no device CUDA shows (its first entry does not exist)";
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

// What CUDA shows, by UUID: its device d is node[d].
std::vector<std::string> cuda_uuids(int count) {
  std::vector<std::string> node;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp props{};
    cuda_check(cudaGetDeviceProperties(&props, d), "cudaGetDeviceProperties");
    node.push_back(uuid_text(props.uuid));
  }
  return node;
}

// The CUDA ordinals of the devices handed down, in the list's order.
std::vector<int> handed_down_ordinals(const HandedDown &list, int count) {
  std::vector<int> all;
  for (int d = 0; d < count; ++d) all.push_back(d);
  if (list.variable == "CUDA_VISIBLE_DEVICES") {
    // The runtime applied it, ending the list at the first entry it could not find: an entry
    // left out is one that does not exist, and the pool refuses to run short of it.
    if (static_cast<size_t>(count) < list.entries.size()) {
      fail(GF_ERR_NOT_FOUND, "CUDA_VISIBLE_DEVICES='" + list.value + "' names device '" +
                                 list.entries[static_cast<size_t>(count)] +
                                 "', which does not exist: CUDA found only the " +
                                 std::to_string(count) + " entries before it");
    }
    return all;
  }
  // A MIG instance reports its UUID's bytes as a GPU does: nvidia-smi alone writes "MIG-".
  std::vector<std::string> node = cuda_uuids(count);
  HandedDown mapped = list;
  for (std::string &entry : mapped.entries) {
    if (entry.rfind("MIG-", 0) == 0) entry = "GPU-" + entry.substr(4);
  }
  return select_devices(
      mapped, node,
      "CUDA shows " + std::to_string(count) + " devices, 0 to " + std::to_string(count - 1));
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
  const std::vector<int> handed = handed_down_ordinals(config.handed_down, count);
  std::vector<int> ordinals;
  if (config.devices.empty()) {
    ordinals = handed;
  } else {
    for (int d : config.devices) {
      if (d >= static_cast<int>(handed.size())) {
        fail(GF_ERR_INVALID_ARGUMENT, "gf_pool_config.devices names device " + std::to_string(d) +
                                          ", but only " + std::to_string(handed.size()) +
                                          " CUDA devices were handed down (" +
                                          config.handed_down.source + ")");
      }
      ordinals.push_back(handed[static_cast<size_t>(d)]);
    }
  }
  return std::make_unique<CudaBackend>(config, std::move(ordinals));
}

}  // namespace gf

#endif  // GPUFLOW_HAVE_CUDA
