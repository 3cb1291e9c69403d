// gf_pool_config with every default and environment override applied and every field checked.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "devices/cuda/make_cuda_backend.hpp"
#include "devices/host/host_backend.hpp"
#include "gpuflow.h"

namespace gf {

struct PoolOptions {
  int cpu_workers = 0;
  uint32_t gpu_worker_threads = 2;
  gf_backend backend = GF_BACKEND_AUTO;
  // Each backend's own configuration, filled from gf_pool_config (device_memory_limit goes to
  // both); the backend chosen gets its part.
  HostBackendConfig host;
  CudaBackendConfig cuda;
  double spill_threshold = 0.8;  // >= 1: never spill
  std::vector<std::pair<std::string, double>> cpu_labels, gpu_labels;
};

// Throws gf::Error naming the field or environment variable at fault.
PoolOptions resolve_pool_options(const gf_pool_config &config);

}  // namespace gf
