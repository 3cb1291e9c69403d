// The threads of one CUDA device: a copy engine (transfers in and out of the device, chunked
// through reused pinned buffers, or peer copies) and a completion watcher (events recorded after
// GPU bodies, polled so tasks complete in whatever order their streams finish).
#pragma once

#ifdef GPUFLOW_HAVE_CUDA

#include <cuda_runtime.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "devices/backend.hpp"

namespace gf {

struct CudaCopy {
  CopyRequest request;
  int from_ordinal = -1;  // CUDA ordinal of the source device, -1 for host
  int to_ordinal = -1;    // CUDA ordinal of the destination device, -1 for host
  bool peer = false;      // a direct device-to-device copy is possible
  CopyDone done;
};

class CudaCopyEngine {
 public:
  CudaCopyEngine(int ordinal, size_t staging_bytes);
  ~CudaCopyEngine();
  CudaCopyEngine(const CudaCopyEngine &) = delete;
  CudaCopyEngine &operator=(const CudaCopyEngine &) = delete;

  void submit(CudaCopy copy);
  void drain_and_stop();

 private:
  void loop();
  std::string perform(const CudaCopy &copy);  // error text, empty on success
  std::string to_device(const void *host, void *device, uint64_t bytes);
  std::string from_device(const void *device, void *host, uint64_t bytes);

  int ordinal_;
  size_t staging_bytes_;
  cudaStream_t stream_ = nullptr;
  void *staging_[2] = {nullptr, nullptr};  // pinned, reused for every staged copy
  cudaEvent_t staged_[2] = {nullptr, nullptr};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<CudaCopy> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

class CudaCompletions {
 public:
  explicit CudaCompletions(int ordinal);
  ~CudaCompletions();
  CudaCompletions(const CudaCompletions &) = delete;
  CudaCompletions &operator=(const CudaCompletions &) = delete;

  // Records an event on `stream` now; `done` runs once the event has fired (or failed).
  void watch(cudaStream_t stream, CopyDone done);
  void drain_and_stop();

 private:
  void loop();
  struct Pending {
    cudaEvent_t event;
    CopyDone done;
  };
  int ordinal_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> spare_events_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gf

#endif
