#ifdef GPUFLOW_HAVE_CUDA

#include "devices/cuda/cuda_engines.hpp"

#include <chrono>
#include <cstring>

#include "devices/cuda/cuda_check.hpp"

namespace gf {

// ---- copy engine ----------------------------------------------------------------------------

CudaCopyEngine::CudaCopyEngine(int ordinal, size_t staging_bytes)
    : ordinal_(ordinal), staging_bytes_(staging_bytes) {
  cuda_check(cudaSetDevice(ordinal_), "cudaSetDevice");
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  for (int i = 0; i < 2; ++i) {
    cuda_check(cudaMallocHost(&staging_[i], staging_bytes_), "cudaMallocHost (staging)");
    cuda_check(cudaEventCreateWithFlags(&staged_[i], cudaEventDisableTiming), "cudaEventCreate");
  }
  thread_ = std::thread([this] { loop(); });
}

CudaCopyEngine::~CudaCopyEngine() {
  drain_and_stop();
  cudaSetDevice(ordinal_);
  for (int i = 0; i < 2; ++i) {
    if (staged_[i]) cudaEventDestroy(staged_[i]);
    if (staging_[i]) cudaFreeHost(staging_[i]);
  }
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaCopyEngine::submit(CudaCopy copy) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(copy));
  }
  cv_.notify_one();
}

void CudaCopyEngine::drain_and_stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void CudaCopyEngine::loop() {
  cudaSetDevice(ordinal_);
  for (;;) {
    CudaCopy copy;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      copy = std::move(queue_.front());
      queue_.pop_front();
    }
    std::string error = perform(copy);
    copy.done(error);  // released here, outside the engine's mutex
  }
}

std::string CudaCopyEngine::to_device(const void *host, void *device, uint64_t bytes) {
  // Pageable host memory goes through two pinned buffers in turn, so the memcpy into one
  // overlaps the DMA out of the other.
  for (uint64_t offset = 0, k = 0; offset < bytes; offset += staging_bytes_, k ^= 1) {
    uint64_t n = std::min<uint64_t>(staging_bytes_, bytes - offset);
    if (cudaError_t e = cudaEventSynchronize(staged_[k]); e != cudaSuccess) return cuda_message(e);
    std::memcpy(staging_[k], static_cast<const char *>(host) + offset, n);
    if (cudaError_t e = cudaMemcpyAsync(static_cast<char *>(device) + offset, staging_[k], n,
                                        cudaMemcpyHostToDevice, stream_);
        e != cudaSuccess) {
      return cuda_message(e);
    }
    if (cudaError_t e = cudaEventRecord(staged_[k], stream_); e != cudaSuccess)
      return cuda_message(e);
  }
  cudaError_t e = cudaStreamSynchronize(stream_);
  return e == cudaSuccess ? std::string() : cuda_message(e);
}

std::string CudaCopyEngine::from_device(const void *device, void *host, uint64_t bytes) {
  uint64_t pending_offset = 0, pending_bytes = 0;
  int pending_k = -1;
  auto drain = [&]() -> std::string {
    if (pending_k < 0) return {};
    if (cudaError_t e = cudaEventSynchronize(staged_[pending_k]); e != cudaSuccess) {
      return cuda_message(e);
    }
    std::memcpy(static_cast<char *>(host) + pending_offset, staging_[pending_k], pending_bytes);
    pending_k = -1;
    return {};
  };
  for (uint64_t offset = 0, k = 0; offset < bytes; offset += staging_bytes_, k ^= 1) {
    uint64_t n = std::min<uint64_t>(staging_bytes_, bytes - offset);
    if (cudaError_t e = cudaMemcpyAsync(staging_[k], static_cast<const char *>(device) + offset, n,
                                        cudaMemcpyDeviceToHost, stream_);
        e != cudaSuccess) {
      return cuda_message(e);
    }
    if (cudaError_t e = cudaEventRecord(staged_[k], stream_); e != cudaSuccess)
      return cuda_message(e);
    if (std::string error = drain(); !error.empty()) return error;  // the previous chunk
    pending_offset = offset;
    pending_bytes = n;
    pending_k = static_cast<int>(k);
  }
  return drain();
}

std::string CudaCopyEngine::perform(const CudaCopy &copy) {
  const CopyRequest &r = copy.request;
  if (r.bytes == 0) return {};
  if (copy.from_ordinal < 0) return to_device(r.source, r.destination, r.bytes);
  if (copy.to_ordinal < 0) return from_device(r.source, r.destination, r.bytes);
  // Between devices: a direct copy over NVLink/PCIe where peer access is enabled; otherwise the
  // driver stages the same call through pinned host memory.
  cudaError_t e = cudaMemcpyPeerAsync(r.destination, copy.to_ordinal, r.source, copy.from_ordinal,
                                      r.bytes, stream_);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
  return e == cudaSuccess ? std::string() : cuda_message(e);
}

// ---- completions ----------------------------------------------------------------------------

CudaCompletions::CudaCompletions(int ordinal) : ordinal_(ordinal), thread_([this] { loop(); }) {}

CudaCompletions::~CudaCompletions() {
  drain_and_stop();
  cudaSetDevice(ordinal_);
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
}

void CudaCompletions::watch(cudaStream_t stream, CopyDone done) {
  cudaEvent_t event = nullptr;
  {
    std::lock_guard lock(mu_);
    if (!spare_events_.empty()) {
      event = spare_events_.back();
      spare_events_.pop_back();
    }
  }
  cudaError_t e = event ? cudaSuccess : cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(event, stream);
  if (e != cudaSuccess) {
    if (event) {
      std::lock_guard lock(mu_);
      spare_events_.push_back(event);
    }
    done(cuda_message(e));
    return;
  }
  {
    std::lock_guard lock(mu_);
    pending_.push_back(Pending{event, std::move(done)});
  }
  cv_.notify_one();
}

void CudaCompletions::drain_and_stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void CudaCompletions::loop() {
  cudaSetDevice(ordinal_);
  std::vector<Pending> fired;
  std::vector<std::string> errors;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, and nothing left in flight
      // Poll every watched event; finished ones leave the list, in whatever order they fired.
      for (size_t i = 0; i < pending_.size();) {
        cudaError_t e = cudaEventQuery(pending_[i].event);
        if (e == cudaErrorNotReady) {
          ++i;
          continue;
        }
        errors.push_back(e == cudaSuccess ? std::string() : cuda_message(e));
        fired.push_back(std::move(pending_[i]));
        pending_[i] = std::move(pending_.back());
        pending_.pop_back();
      }
    }
    for (size_t i = 0; i < fired.size(); ++i) {
      fired[i].done(errors[i]);
      std::lock_guard lock(mu_);
      spare_events_.push_back(fired[i].event);
    }
    if (fired.empty()) std::this_thread::sleep_for(std::chrono::microseconds(20));
    fired.clear();
    errors.clear();
  }
}

}  // namespace gf

#endif  // GPUFLOW_HAVE_CUDA
