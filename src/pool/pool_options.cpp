#include "pool/pool_options.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "core/error.hpp"
#include "core/fixed_point.hpp"
#include "core/resource_names.hpp"
#include "devices/backend.hpp"
#include "devices/visible_devices.hpp"

namespace gf {
namespace {

// A number from the environment, or nothing when the variable is unset or empty.
bool env_number(const char *variable, double &out) {
  const char *text = std::getenv(variable);
  if (!text || !*text) return false;
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(text, &end);
  if (errno || *end != '\0') {
    fail(GF_ERR_INVALID_ARGUMENT,
         std::string("environment variable ") + variable + "='" + text + "' is not a number");
  }
  out = value;
  return true;
}

// An environment variable that must hold a whole number in [low, high], or nothing.
bool env_integer(const char *variable, double low, double high, double &out) {
  if (!env_number(variable, out)) return false;
  if (!(out >= low && out <= high) || out != std::floor(out)) {
    fail(GF_ERR_INVALID_ARGUMENT, std::string("environment variable ") + variable + "='" +
                                      std::getenv(variable) + "' is not a whole number from " +
                                      std::to_string(static_cast<int64_t>(low)) + " to " +
                                      std::to_string(static_cast<int64_t>(high)));
  }
  return true;
}

// Worker labels: user names only (the pool sets cpu, GPU and gpu_memory itself), each once, with
// an amount the ledger can hold.
std::vector<std::pair<std::string, double>> labels(const gf_resource *list, uint32_t count,
                                                   const char *field) {
  if (count && !list)
    fail(GF_ERR_INVALID_ARGUMENT, std::string("gf_pool_config.") + field + " is NULL");
  std::vector<std::pair<std::string, double>> out;
  for (uint32_t i = 0; i < count; ++i) {
    std::string where = std::string("gf_pool_config.") + field + "[" + std::to_string(i) + "]";
    if (!list[i].name || !*list[i].name) fail(GF_ERR_INVALID_ARGUMENT, where + " has no name");
    const std::string name = list[i].name;
    if (name == resource_names::kCpu || name == resource_names::kGpu ||
        name == resource_names::kGpuMemory) {
      fail(GF_ERR_INVALID_ARGUMENT, where + " is named '" + name +
                                        "', a built-in resource the pool sets itself (cpu, GPU, " +
                                        "gpu_memory); a label needs another name");
    }
    for (uint32_t j = 0; j < i; ++j) {
      if (name == list[j].name) {
        fail(GF_ERR_INVALID_ARGUMENT, where + " repeats label '" + name + "' of [" +
                                          std::to_string(j) + "]; give each label once");
      }
    }
    if (!FixedPoint::representable(list[i].amount)) {
      fail(GF_ERR_INVALID_ARGUMENT,
           where + " ('" + name + "') amount must be finite, non-negative and at most 1e14");
    }
    if (FixedPoint::rounds_to_zero(list[i].amount)) {
      fail(GF_ERR_INVALID_ARGUMENT, where + " ('" + name + "') amount " +
                                        std::to_string(list[i].amount) +
                                        " is positive but below the resolution of amounts " +
                                        "(1/10000): it would round to zero");
    }
    out.emplace_back(name, list[i].amount);
  }
  return out;
}

}  // namespace

PoolOptions resolve_pool_options(const gf_pool_config &config) {
  PoolOptions o;
  if (config.backend != GF_BACKEND_AUTO && config.backend != GF_BACKEND_HOST &&
      config.backend != GF_BACKEND_CUDA) {
    fail(GF_ERR_INVALID_ARGUMENT, "gf_pool_config.backend has an unknown value");
  }
  o.backend = config.backend;
  if (config.device_count && !config.devices) {
    fail(GF_ERR_INVALID_ARGUMENT, "gf_pool_config.devices is NULL but device_count is not 0");
  }
  for (uint32_t i = 0; i < config.device_count; ++i) {
    if (config.devices[i] < 0) {
      fail(GF_ERR_INVALID_ARGUMENT,
           "gf_pool_config.devices[" + std::to_string(i) + "] is negative");
    }
    o.cuda.devices.push_back(config.devices[i]);
  }
  double value = 0;
  uint64_t memory_limit = config.device_memory_limit;
  if (memory_limit == 0 && env_integer("GPUFLOW_DEVICE_MEMORY_LIMIT", 0,
                                       static_cast<double>(FixedPoint::kMaxBytes), value)) {
    memory_limit = static_cast<uint64_t>(value);
  }
  if (!FixedPoint::bytes_representable(memory_limit)) {
    fail(GF_ERR_INVALID_ARGUMENT, "gf_pool_config.device_memory_limit is above " +
                                      std::to_string(FixedPoint::kMaxBytes) +
                                      " bytes (GF_MAX_DATA_SIZE)");
  }
  o.cuda.memory_limit = memory_limit;
  double threshold = config.spill_threshold;
  if (threshold == 0 && env_number("GPUFLOW_SPILL_THRESHOLD", value)) threshold = value;
  if (threshold != threshold || threshold < 0) {
    fail(GF_ERR_INVALID_ARGUMENT, "gf_pool_config.spill_threshold must be a fraction >= 0");
  }
  o.spill_threshold = threshold == 0 ? 0.8 : threshold;

  o.cpu_workers = config.cpu_workers;
  if (o.cpu_workers == 0) {
    o.cpu_workers = env_integer("GPUFLOW_CPU_WORKERS", -1e6, 1e6, value)
                        ? static_cast<int>(value)
                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  if (o.cpu_workers < 0) o.cpu_workers = 0;
  if (o.cpu_workers > 4096)
    fail(GF_ERR_INVALID_ARGUMENT, "gf_pool_config.cpu_workers is above 4096");

  int devices = config.emulated_devices;
  if (devices == 0)
    devices =
        env_integer("GPUFLOW_EMULATED_DEVICES", -1e6, 1e6, value) ? static_cast<int>(value) : 2;
  if (devices < 0) devices = 0;
  if (devices > static_cast<int>(kMaxSpaces) - 1) {
    fail(GF_ERR_INVALID_ARGUMENT,
         "gf_pool_config.emulated_devices is above " + std::to_string(kMaxSpaces - 1));
  }
  o.host.devices = devices;
  o.host.handed_down = o.cuda.handed_down = handed_down();

  o.host.device_memory = config.emulated_device_memory;
  if (o.host.device_memory == 0) {
    o.host.device_memory = env_integer("GPUFLOW_EMULATED_DEVICE_MEMORY", 0,
                                       static_cast<double>(FixedPoint::kMaxBytes), value)
                               ? static_cast<uint64_t>(value)
                               : uint64_t{1} << 30;
  }
  o.host.memory_limit = memory_limit;
  if (!FixedPoint::bytes_representable(o.host.device_memory)) {
    fail(GF_ERR_INVALID_ARGUMENT, "gf_pool_config.emulated_device_memory is above " +
                                      std::to_string(FixedPoint::kMaxBytes) +
                                      " bytes (GF_MAX_DATA_SIZE)");
  }

  double bandwidth = config.emulated_bandwidth;
  if (bandwidth != bandwidth)
    fail(GF_ERR_INVALID_ARGUMENT, "gf_pool_config.emulated_bandwidth is NaN");
  if (bandwidth == 0) bandwidth = env_number("GPUFLOW_EMULATED_BANDWIDTH", value) ? value : 10e9;
  o.host.bandwidth = bandwidth < 0 ? 0 : bandwidth;  // negative: unlimited

  o.gpu_worker_threads = config.gpu_worker_threads ? config.gpu_worker_threads : 2;
  if (o.gpu_worker_threads > 64)
    fail(GF_ERR_INVALID_ARGUMENT, "gf_pool_config.gpu_worker_threads is above 64");
  o.cpu_labels =
      labels(config.cpu_worker_labels, config.cpu_worker_label_count, "cpu_worker_labels");
  o.gpu_labels =
      labels(config.gpu_worker_labels, config.gpu_worker_label_count, "gpu_worker_labels");
  if (o.cpu_workers == 0 && devices == 0) {
    fail(GF_ERR_INVALID_ARGUMENT, "gf_pool_config: the pool would have no workers at all");
  }
  return o;
}

}  // namespace gf
