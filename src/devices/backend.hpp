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
inline SpaceId device_space(int device) {
  return static_cast<SpaceId>(device + 1);
}

struct DeviceDescription {
  std::string name;
  uint64_t memory_bytes = 0;
  bool emulated = false;
};

struct CopyRequest {
  SpaceId from = kHostSpace;
  const void *source = nullptr;
  SpaceId to = kHostSpace;
  void *destination = nullptr;
  uint64_t bytes = 0;
};

// Called once, on a backend thread, when a copy ends. error is empty on success.
using CopyDone = std::function<void(const std::string &error)>;

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  virtual const char *name() const = 0;
  virtual int device_count() const = 0;
  virtual DeviceDescription describe(int device) const = 0;

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

  // Runs a GPU body on `device` and returns its result. `stream` receives what the body should
  // enqueue on (NULL for emulated devices).
  virtual int run_gpu_body(int device, gf_task_fn fn, gf_task_ctx *ctx, void *user_data) = 0;

  // Finishes every copy in flight (their callbacks run) and stops backend threads.
  virtual void shutdown() = 0;
};

}  // namespace gf
