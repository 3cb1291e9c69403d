#include "devices/host/host_backend.hpp"

#include <cstring>

namespace gf {
namespace {

constexpr uint64_t kAlignment = 64;

uint64_t aligned_size(uint64_t bytes) {
  return bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

}  // namespace

HostBackend::HostBackend(const HostBackendConfig &config) : config_(config) {
  std::vector<std::string> node;
  for (int d = 0; d < config_.devices; ++d) node.push_back(emulated_uuid(d));
  // A pool without emulated devices is a CPU-only pool: the list a GPU node hands down (a
  // container runtime sets NVIDIA_VISIBLE_DEVICES, Slurm its GPUs) names real GPUs, none of its.
  if (!node.empty()) {
    node_ordinals_ = select_devices(
        config_.handed_down, node,
        "this node has " + std::to_string(config_.devices) + " emulated devices, 0 to " +
            std::to_string(config_.devices - 1) + " (" + node.front() + " to " + node.back() + ")");
  }
  for (size_t d = 0; d < node_ordinals_.size(); ++d) {
    engines_.push_back(std::make_unique<CopyEngine>(config_.bandwidth));
  }
}

HostBackend::~HostBackend() {
  shutdown();
}

DeviceDescription HostBackend::describe(int device) const {
  DeviceDescription d;
  const int node_ordinal = node_ordinals_.at(static_cast<size_t>(device));
  d.name = "emulated device " + std::to_string(node_ordinal);
  d.total_memory = config_.device_memory;
  d.memory_bytes = config_.memory_limit && config_.memory_limit < config_.device_memory
                       ? config_.memory_limit
                       : config_.device_memory;
  d.emulated = true;
  d.uuid = emulated_uuid(node_ordinal);
  return d;
}

void *HostBackend::allocate(SpaceId, uint64_t bytes) {
  if (bytes <= 16) return std::malloc(bytes == 0 ? 1 : bytes);  // malloc aligns to 16 already
  return std::aligned_alloc(kAlignment, aligned_size(bytes));
}

void HostBackend::deallocate(SpaceId, void *ptr, uint64_t) {
  std::free(ptr);
}

CopyEngine &HostBackend::engine_for(const CopyRequest &request) {
  SpaceId device_end = request.to != kHostSpace ? request.to : request.from;
  return *engines_.at(device_end - 1);
}

void HostBackend::copy_async(const CopyRequest &request, CopyDone done) {
  if (request.from == kHostSpace && request.to == kHostSpace) {
    if (request.bytes) std::memcpy(request.destination, request.source, request.bytes);
    done(std::string());
    return;
  }
  engine_for(request).submit(request, std::move(done));
}

void HostBackend::copy_sync(const CopyRequest &request) {
  if (request.bytes) std::memcpy(request.destination, request.source, request.bytes);
}

double HostBackend::transfer_seconds(SpaceId from, SpaceId to, uint64_t bytes) const {
  if (from == to) return 0;
  // Every copy pays a fixed cost (queueing on the engine, waking its thread), like a DMA launch,
  // so moving many tiny objects is not mistaken for free.
  constexpr double kCopyLatency = 10e-6;
  return kCopyLatency +
         (config_.bandwidth > 0 ? static_cast<double>(bytes) / config_.bandwidth : 0);
}

GpuBodyResult HostBackend::run_gpu_body(int, gf_task_fn fn, gf_task_ctx *ctx, void *user_data) {
  return GpuBodyResult{fn(ctx, user_data), {}};
}

void HostBackend::shutdown() {
  for (auto &engine : engines_) engine->drain_and_stop();
}

}  // namespace gf
