#ifdef GPUFLOW_HAVE_CUDA

#include "devices/cuda/cuda_backend.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "devices/cuda/cuda_check.hpp"
#include "devices/cuda/cuda_engines.hpp"

namespace gf {
namespace {

constexpr size_t kStagingBytes = 8u << 20;  // per pinned staging buffer, two per device
constexpr double kLinkLatency = 10e-6;
constexpr double kHostLinkBandwidth = 25e9;  // PCIe, per direction
constexpr double kPeerBandwidth = 150e9;     // NVLink-class peer links
constexpr double kStagedBandwidth = 10e9;    // device to device through host memory

}  // namespace

CudaBackend::CudaBackend(const CudaBackendConfig &config, std::vector<int> cuda_ordinals) {
  for (int ordinal : cuda_ordinals) {
    Device d;
    d.cuda_ordinal = ordinal;
    cuda_check(cudaSetDevice(ordinal), "cudaSetDevice");
    cudaDeviceProp props{};
    cuda_check(cudaGetDeviceProperties(&props, ordinal), "cudaGetDeviceProperties");
    size_t free_bytes = 0, total_bytes = 0;
    cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    d.desc.name = props.name;
    d.desc.total_memory = total_bytes;
    uint64_t usable = free_bytes / 100 * 95;
    d.desc.memory_bytes =
        config.memory_limit && config.memory_limit < usable ? config.memory_limit : usable;
    d.desc.emulated = false;
    d.desc.compute_major = props.major;
    d.desc.compute_minor = props.minor;
    d.desc.uuid = uuid_text(props.uuid);
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", static_cast<unsigned>(props.pciDomainID),
                  static_cast<unsigned>(props.pciBusID), static_cast<unsigned>(props.pciDeviceID));
    d.desc.pci_bus_id = bus;
    // The pool's memory stays cached in the driver's pool rather than going back to the OS
    // after every free: allocation is then a stream-ordered sub-allocation.
    cuda_check(cudaDeviceGetDefaultMemPool(&d.pool, ordinal), "cudaDeviceGetDefaultMemPool");
    uint64_t keep = d.desc.memory_bytes;
    cuda_check(cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrReleaseThreshold, &keep),
               "cudaMemPoolSetAttribute");
    cuda_check(cudaStreamCreateWithFlags(&d.alloc_stream, cudaStreamNonBlocking),
               "cudaStreamCreate");
    d.engine = std::make_unique<CudaCopyEngine>(ordinal, kStagingBytes);
    d.completions = std::make_unique<CudaCompletions>(ordinal);
    devices_.push_back(std::move(d));
  }
  const size_t n = devices_.size();
  peer_.assign(n, std::vector<bool>(n, false));
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      int can = 0;
      cudaDeviceCanAccessPeer(&can, devices_[a].cuda_ordinal, devices_[b].cuda_ordinal);
      if (!can) continue;
      cudaSetDevice(devices_[a].cuda_ordinal);
      cudaError_t e = cudaDeviceEnablePeerAccess(devices_[b].cuda_ordinal, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      peer_[a][b] = e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled;
    }
  }
}

CudaBackend::~CudaBackend() {
  shutdown();
}

bool CudaBackend::peer_access(int from, int to) const {
  return from == to || peer_[from][to];
}

void *CudaBackend::allocate(SpaceId space, uint64_t bytes) {
  if (space == kHostSpace) return std::malloc(bytes ? bytes : 1);
  Device &d = device_of(space);
  if (cudaSetDevice(d.cuda_ordinal) != cudaSuccess) return nullptr;
  void *ptr = nullptr;
  if (cudaMallocFromPoolAsync(&ptr, bytes ? bytes : 1, d.pool, d.alloc_stream) != cudaSuccess ||
      cudaStreamSynchronize(d.alloc_stream) != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky: clear it
    return nullptr;
  }
  return ptr;
}

void CudaBackend::deallocate(SpaceId space, void *ptr, uint64_t) {
  if (space == kHostSpace) {
    std::free(ptr);
    return;
  }
  Device &d = device_of(space);
  cudaSetDevice(d.cuda_ordinal);
  cudaFreeAsync(ptr, d.alloc_stream);
}

void CudaBackend::copy_async(const CopyRequest &request, CopyDone done) {
  CudaCopy copy;
  copy.request = request;
  copy.from_ordinal = request.from == kHostSpace ? -1 : device_of(request.from).cuda_ordinal;
  copy.to_ordinal = request.to == kHostSpace ? -1 : device_of(request.to).cuda_ordinal;
  copy.peer = request.from != kHostSpace && request.to != kHostSpace &&
              peer_access(static_cast<int>(request.from - 1), static_cast<int>(request.to - 1));
  copy.done = std::move(done);
  // The device end's engine moves it: into a device on the destination's, out to the host on
  // the source's.
  SpaceId device_end = request.to != kHostSpace ? request.to : request.from;
  device_of(device_end).engine->submit(std::move(copy));
}

void CudaBackend::copy_sync(const CopyRequest &request) {
  if (request.bytes == 0) return;
  if (request.from == kHostSpace && request.to == kHostSpace) {
    std::memcpy(request.destination, request.source, request.bytes);
    return;
  }
  cuda_check(cudaMemcpy(request.destination, request.source, request.bytes, cudaMemcpyDefault),
             "cudaMemcpy (fetch)");
}

double CudaBackend::transfer_seconds(SpaceId from, SpaceId to, uint64_t bytes) const {
  if (from == to) return 0;
  double bandwidth = kHostLinkBandwidth;
  if (from != kHostSpace && to != kHostSpace) {
    bandwidth = peer_access(static_cast<int>(from - 1), static_cast<int>(to - 1))
                    ? kPeerBandwidth
                    : kStagedBandwidth;
  }
  return kLinkLatency + static_cast<double>(bytes) / bandwidth;
}

void *CudaBackend::bind_thread(int device, uint32_t) {
  Device &d = devices_.at(device);
  cuda_check(cudaSetDevice(d.cuda_ordinal), "cudaSetDevice (worker thread)");
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  std::lock_guard lock(streams_mu_);
  d.worker_streams.push_back(stream);
  return stream;
}

GpuBodyResult CudaBackend::run_gpu_body(int device, gf_task_fn fn, gf_task_ctx *ctx,
                                        void *user_data) {
  (void)cudaGetLastError();  // a failure of an earlier body on this thread is not this one's
  GpuBodyResult result;
  result.rc = fn(ctx, user_data);
  // A launch the body made may have failed synchronously (bad configuration, no kernel image).
  cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess) {
    result.device_error =
        "CUDA error on device " + std::to_string(device) + ": " + cuda_message(launch);
  }
  return result;
}

void CudaBackend::after_stream(int device, void *stream, CopyDone done) {
  devices_.at(device).completions->watch(static_cast<cudaStream_t>(stream), std::move(done));
}

void CudaBackend::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  for (Device &d : devices_) {
    d.completions->drain_and_stop();
    d.engine->drain_and_stop();
  }
  for (Device &d : devices_) {
    cudaSetDevice(d.cuda_ordinal);
    for (cudaStream_t s : d.worker_streams) cudaStreamDestroy(s);
    d.worker_streams.clear();
    cudaStreamSynchronize(d.alloc_stream);
  }
}

}  // namespace gf

#endif  // GPUFLOW_HAVE_CUDA
