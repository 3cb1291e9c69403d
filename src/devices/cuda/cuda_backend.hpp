// The CUDA backend: one device per selected GPU, numbered in PCI bus order. Device memory comes
// from each device's stream-ordered pool; copies run on a copy engine per device (peer copies
// where peer access exists, else staged through reused pinned host buffers), overlapping with the
// workers' compute streams; a GPU body enqueues on its thread's stream and its task completes
// when an event recorded after it fires, observed by a completion thread per device.
#pragma once

#ifdef GPUFLOW_HAVE_CUDA

#include <cuda_runtime.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "devices/backend.hpp"
#include "devices/cuda/make_cuda_backend.hpp"

namespace gf {

class CudaCopyEngine;
class CudaCompletions;

class CudaBackend final : public DeviceBackend {
 public:
  // Throws gf::Error when a selected device cannot be initialised.
  CudaBackend(const CudaBackendConfig &config, std::vector<int> cuda_ordinals);
  ~CudaBackend() override;

  const char *name() const override { return "cuda"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  DeviceDescription describe(int device) const override { return devices_[device].desc; }
  bool peer_access(int from, int to) const override;
  void *allocate(SpaceId space, uint64_t bytes) override;
  void deallocate(SpaceId space, void *ptr, uint64_t bytes) override;
  void copy_async(const CopyRequest &request, CopyDone done) override;
  void copy_sync(const CopyRequest &request) override;
  double transfer_seconds(SpaceId from, SpaceId to, uint64_t bytes) const override;
  void *bind_thread(int device, uint32_t thread) override;
  GpuBodyResult run_gpu_body(int device, gf_task_fn fn, gf_task_ctx *ctx, void *user_data) override;
  void after_stream(int device, void *stream, CopyDone done) override;
  void shutdown() override;

  int cuda_ordinal(int device) const { return devices_[device].cuda_ordinal; }

 private:
  struct Device {
    int cuda_ordinal = 0;
    DeviceDescription desc;
    cudaMemPool_t pool = nullptr;
    cudaStream_t alloc_stream = nullptr;
    std::vector<cudaStream_t> worker_streams;  // created by bind_thread, destroyed at shutdown
    std::unique_ptr<CudaCopyEngine> engine;
    std::unique_ptr<CudaCompletions> completions;
  };
  Device &device_of(SpaceId space) { return devices_.at(space - 1); }

  std::vector<Device> devices_;
  std::vector<std::vector<bool>> peer_;  // peer_[from][to]
  std::mutex streams_mu_;
  bool shut_down_ = false;
};

}  // namespace gf

#endif  // GPUFLOW_HAVE_CUDA
