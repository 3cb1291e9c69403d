// The seam between the scheduler and devices. A backend provides memory spaces (the host is space
// 0, device d is space d + 1), allocation in them, asynchronous copies between them, cost
// estimates for placement, and the call that runs a GPU body on a device. The host backend
// emulates devices in host memory; the CUDA backend (a separate issue) drives real GPUs. The
// scheduler knows nothing else about either.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "gpuflow.h"

namespace gf {

using SpaceId = uint32_t;
inline constexpr SpaceId kHostSpace = 0;
inline constexpr SpaceId kMaxSpaces = 64;  // spaces are tracked in 64-bit masks
inline constexpr SpaceId kNoSpace = UINT32_MAX;
inline SpaceId device_space(int device) {
  return static_cast<SpaceId>(device + 1);
}

struct DeviceDescription {
  std::string name;
  uint64_t total_memory = 0;  // what the device has
  uint64_t memory_bytes = 0;  // what the pool may use (its gpu_memory capacity)
  bool emulated = false;
  int compute_major = 0, compute_minor = 0;
  std::string uuid;        // "GPU-…" as nvidia-smi prints it; emulated: emulated_uuid()
  std::string pci_bus_id;  // empty when emulated
};

struct CopyRequest {
  SpaceId from = kHostSpace;
  const void *source = nullptr;
  SpaceId to = kHostSpace;
  void *destination = nullptr;
  uint64_t bytes = 0;
};

// What running a GPU body gave: the body's own result, and a failure the device reported for
// what the body launched (empty when none). The caller decides what the task makes of them.
struct GpuBodyResult {
  int rc = 0;
  std::string device_error;
};

// Called once, on a backend thread, when a copy ends. error is empty on success.
using CopyDone = std::function<void(const std::string &error)>;

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  virtual const char *name() const = 0;
  virtual int device_count() const = 0;
  virtual DeviceDescription describe(int device) const = 0;
  // Whether `from` can copy straight into `to`; copies between others are staged through host.
  virtual bool peer_access(int from, int to) const = 0;

  // Memory of `bytes` in `space`, or nullptr when the system refuses. Accounting against device
  // capacity is the scheduler's (ledger); this is the allocation itself. Thread-safe.
  virtual void *allocate(SpaceId space, uint64_t bytes) = 0;
  virtual void deallocate(SpaceId space, void *ptr, uint64_t bytes) = 0;

  // Starts a copy and returns at once; `done` runs when it has finished. Thread-safe.
  virtual void copy_async(const CopyRequest &request, CopyDone done) = 0;
  // Copies and waits (fetching results to the caller). Thread-safe.
  virtual void copy_sync(const CopyRequest &request) = 0;
  // Estimated seconds a copy of `bytes` from one space to another takes.
  virtual double transfer_seconds(SpaceId from, SpaceId to, uint64_t bytes) const = 0;

  // Binds the calling GPU worker thread to `device` and returns the stream its bodies enqueue
  // on (a cudaStream_t), or nullptr for emulated devices. Called once per thread, on it.
  virtual void *bind_thread(int device, uint32_t thread) = 0;
  // Runs a GPU body on `device`, on the thread bound to it, and returns its result with any
  // launch failure the device reported synchronously. `ctx` is passed through to the body only.
  virtual GpuBodyResult run_gpu_body(int device, gf_task_fn fn, gf_task_ctx *ctx,
                                     void *user_data) = 0;
  // Calls `done` exactly once when everything enqueued on `stream` so far has finished (error
  // text empty on success, else the device's message). It may run on any thread, and may run
  // before this returns; it never runs with a lock of the caller's held by the backend.
  virtual void after_stream(int device, void *stream, CopyDone done) = 0;

  // Finishes every copy in flight (their callbacks run) and stops backend threads.
  virtual void shutdown() = 0;
};

}  // namespace gf
