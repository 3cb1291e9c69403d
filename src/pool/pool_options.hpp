// gf_pool_config with every default and environment override applied and every field checked.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "devices/host/host_backend.hpp"
#include "gpuflow.h"

namespace gf {

struct PoolOptions {
  int cpu_workers = 0;
  HostBackendConfig host;
  uint32_t gpu_worker_threads = 2;
  gf_backend backend = GF_BACKEND_AUTO;
  std::vector<int> devices;          // CUDA ordinals to use; empty: all
  uint64_t device_memory_limit = 0;  // 0: backend default
  double spill_threshold = 0.8;      // >= 1: never spill
  std::vector<std::pair<std::string, double>> cpu_labels, gpu_labels;
};

// Throws gf::Error naming the field or environment variable at fault.
PoolOptions resolve_pool_options(const gf_pool_config &config);

}  // namespace gf
