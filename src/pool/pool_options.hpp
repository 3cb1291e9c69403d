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
  std::vector<std::pair<std::string, double>> cpu_labels, gpu_labels;
};

// Throws gf::Error naming the field or environment variable at fault.
PoolOptions resolve_pool_options(const gf_pool_config &config);

}  // namespace gf
