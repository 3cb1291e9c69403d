// The host backend: N emulated devices whose "device memory" is host memory. Capacity is
// enforced by the scheduler's ledger exactly as on a real GPU, and copies to, from and between
// devices run on per-device copy engines at a configured bandwidth, so placement, transfers and
// memory limits are exercised on machines without a GPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/emulated_uuid.hpp"
#include "devices/backend.hpp"
#include "devices/host/copy_engine.hpp"
#include "devices/visible_devices.hpp"

namespace gf {

struct HostBackendConfig {
  int devices = 2;  // the emulated node's devices
  // Which of them the backend drives (devices/visible_devices.hpp): a pool started with
  // CUDA_VISIBLE_DEVICES=1,3 on 4 emulated devices drives 2, which keep their UUIDs.
  HandedDown handed_down;
  uint64_t device_memory = uint64_t{1} << 30;
  uint64_t memory_limit = 0;  // the pool's share of each device; 0: all of it
  double bandwidth = 10e9;    // bytes per second; 0: copies take only the memcpy
};

class HostBackend final : public DeviceBackend {
 public:
  // Throws gf::Error when the list handed down names a device the emulated node lacks.
  explicit HostBackend(const HostBackendConfig &config);
  ~HostBackend() override;

  const char *name() const override { return "host"; }
  int device_count() const override { return static_cast<int>(node_ordinals_.size()); }
  DeviceDescription describe(int device) const override;
  bool peer_access(int, int) const override { return true; }  // emulated devices share RAM
  void *allocate(SpaceId space, uint64_t bytes) override;
  void deallocate(SpaceId space, void *ptr, uint64_t bytes) override;
  void copy_async(const CopyRequest &request, CopyDone done) override;
  void copy_sync(const CopyRequest &request) override;
  double transfer_seconds(SpaceId from, SpaceId to, uint64_t bytes) const override;
  void *bind_thread(int, uint32_t) override { return nullptr; }
  GpuBodyResult run_gpu_body(int device, gf_task_fn fn, gf_task_ctx *ctx, void *user_data) override;
  // An emulated body did its work before returning: it is complete at once.
  void after_stream(int, void *, CopyDone done) override { done(std::string()); }
  void shutdown() override;

 private:
  // The engine of the device end of a copy (the destination, unless it is the host).
  CopyEngine &engine_for(const CopyRequest &request);

  HostBackendConfig config_;
  std::vector<int> node_ordinals_;  // by device: its ordinal among the emulated node's
  std::vector<std::unique_ptr<CopyEngine>> engines_;
};

}  // namespace gf
