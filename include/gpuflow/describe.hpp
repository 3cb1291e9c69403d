// gpuflow/describe.hpp — part of gpuflow.hpp (include that): builders over gpuflow.h's
// descriptor and config structs for pools, buffers, commands, leases and submits.
#ifndef GPUFLOW_DESCRIBE_HPP
#define GPUFLOW_DESCRIBE_HPP

#include "error.hpp"

namespace gpuflow {

// ---------------------------------------------------------------------------------------------
// Descriptions: builders over gpuflow.h's descriptor structs. Each keeps copies of its strings
// and lists; desc() gives the C struct as gpuflow sees it, pointing into the builder, valid
// until the builder changes or goes. They are plain values, used by one thread at a time, and
// copyable: gpuflow copies what it reads from them during the call that takes them.

// A pool's configuration (gf_pool_config); every field unset means gpuflow's default.
class PoolConfig {
 public:
  PoolConfig() { gf_pool_config_init(&c_, sizeof c_); }
  // Emulated devices on the host backend: what tests and examples run on any machine.
  static PoolConfig host(int32_t cpu_workers, int32_t emulated_devices,
                         uint64_t device_memory = 0) {
    PoolConfig config;
    config.backend(GF_BACKEND_HOST).cpu_workers(cpu_workers).emulated_devices(emulated_devices);
    config.emulated_device_memory(device_memory);
    return config;
  }
  PoolConfig &backend(gf_backend v) { return c_.backend = v, *this; }
  PoolConfig &cpu_workers(int32_t v) { return c_.cpu_workers = v, *this; }
  PoolConfig &emulated_devices(int32_t v) { return c_.emulated_devices = v, *this; }
  PoolConfig &emulated_device_memory(uint64_t v) { return c_.emulated_device_memory = v, *this; }
  PoolConfig &emulated_bandwidth(double v) { return c_.emulated_bandwidth = v, *this; }
  PoolConfig &gpu_worker_threads(uint32_t v) { return c_.gpu_worker_threads = v, *this; }
  PoolConfig &cpu_label(std::string name, double amount) {
    return cpu_labels_.push_back({std::move(name), amount}), *this;
  }
  PoolConfig &gpu_label(std::string name, double amount) {
    return gpu_labels_.push_back({std::move(name), amount}), *this;
  }
  PoolConfig &devices(std::vector<int32_t> v) { return devices_ = std::move(v), *this; }
  PoolConfig &device_memory_limit(uint64_t v) { return c_.device_memory_limit = v, *this; }
  PoolConfig &spill_threshold(double v) { return c_.spill_threshold = v, *this; }
  PoolConfig &endpoint(std::string v) { return endpoint_ = std::move(v), *this; }
  PoolConfig &dashboard(std::string v) { return dashboard_ = std::move(v), *this; }
  PoolConfig &token_file(std::string v) { return token_file_ = std::move(v), *this; }

  const gf_pool_config &desc() {
    c_.cpu_worker_labels = labels(cpu_labels_, c_cpu_labels_, c_.cpu_worker_label_count);
    c_.gpu_worker_labels = labels(gpu_labels_, c_gpu_labels_, c_.gpu_worker_label_count);
    c_.devices = devices_.empty() ? nullptr : devices_.data();
    c_.device_count = static_cast<uint32_t>(devices_.size());
    c_.endpoint = detail::c_str_or_null(endpoint_);
    c_.dashboard = detail::c_str_or_null(dashboard_);
    c_.token_file = detail::c_str_or_null(token_file_);
    return c_;
  }

 private:
  static const gf_resource *labels(const std::vector<Resource> &in, std::vector<gf_resource> &out,
                                   uint32_t &count) {
    out.clear();
    for (const Resource &r : in) out.push_back({r.name.c_str(), r.amount});
    count = static_cast<uint32_t>(out.size());
    return out.empty() ? nullptr : out.data();
  }
  gf_pool_config c_;
  std::vector<Resource> cpu_labels_, gpu_labels_;
  std::vector<gf_resource> c_cpu_labels_, c_gpu_labels_;
  std::vector<int32_t> devices_;
  std::string endpoint_, dashboard_, token_file_;
};

// A buffer a task produces (gf_buffer_desc): its name, size (0: the producer sets it), flags.
class Buffer {
 public:
  explicit Buffer(std::string name = {}) : name_(std::move(name)) {
    gf_buffer_desc_init(&c_, sizeof c_);
  }
  Buffer &size(uint64_t bytes) { return c_.size = bytes, *this; }
  // Keep it after its last consumer, for Run::fetch (data no task consumes is always kept).
  Buffer &keep(bool on = true) {
    c_.flags = on ? (c_.flags | GF_DATA_KEEP) : (c_.flags & ~uint32_t{GF_DATA_KEEP});
    return *this;
  }
  Buffer &flags(uint32_t flags) { return c_.flags = flags, *this; }
  const gf_buffer_desc &desc() {
    c_.name = detail::c_str_or_null(name_);
    return c_;
  }

 private:
  std::string name_;
  gf_buffer_desc c_;
};

// An external command as a task body (gf_command_desc).
class Command {
 public:
  explicit Command(std::vector<std::string> argv) : argv_(std::move(argv)) {
    gf_command_desc_init(&c_, sizeof c_);
  }
  Command &env(std::string name_equals_value) {
    return env_.push_back(std::move(name_equals_value)), *this;
  }
  Command &working_dir(std::string dir) { return working_dir_ = std::move(dir), *this; }
  Command &timeout(double seconds) { return c_.timeout_s = seconds, *this; }
  Command &log_dir(std::string dir) { return log_dir_ = std::move(dir), *this; }
  const gf_command_desc &desc() {
    c_.argv = pointers(argv_, c_argv_, c_.argc);
    c_.env = pointers(env_, c_env_, c_.env_count);
    c_.working_dir = detail::c_str_or_null(working_dir_);
    c_.log_dir = detail::c_str_or_null(log_dir_);
    return c_;
  }

 private:
  static const char *const *pointers(const std::vector<std::string> &in,
                                     std::vector<const char *> &out, uint32_t &count) {
    out.clear();
    for (const std::string &s : in) out.push_back(s.c_str());
    count = static_cast<uint32_t>(out.size());
    return out.empty() ? nullptr : out.data();
  }
  std::vector<std::string> argv_, env_;
  std::vector<const char *> c_argv_, c_env_;
  std::string working_dir_, log_dir_;
  gf_command_desc c_;
};

// A lease request (gf_lease_request): gpus 0.5 is half of one device, 2 is two whole ones.
class LeaseRequest {
 public:
  LeaseRequest() { c_ = GF_LEASE_REQUEST_INIT; }
  LeaseRequest &gpus(double v) { return c_.gpus = v, *this; }
  LeaseRequest &gpu_memory(uint64_t bytes) { return c_.gpu_memory = bytes, *this; }
  LeaseRequest &cpus(double v) { return c_.cpus = v, *this; }
  LeaseRequest &devices(std::vector<int32_t> v) { return devices_ = std::move(v), *this; }
  LeaseRequest &priority(int32_t v) { return c_.priority = v, *this; }
  LeaseRequest &name(std::string v) { return name_ = std::move(v), *this; }
  const gf_lease_request &desc() {
    c_.devices = devices_.empty() ? nullptr : devices_.data();
    c_.device_count = static_cast<uint32_t>(devices_.size());
    c_.name = detail::c_str_or_null(name_);
    return c_;
  }

 private:
  gf_lease_request c_;
  std::vector<int32_t> devices_;
  std::string name_;
};

// How a graph is submitted (gf_submit_options). on_complete is the C callback: it runs on a
// gpuflow thread and must not throw or block.
struct SubmitOptions {
  gf_run_where where = GF_RUN_ANYWHERE;
  gf_run_callback on_complete = nullptr;
  void *user_data = nullptr;
};

}  // namespace gpuflow

#endif  // GPUFLOW_DESCRIBE_HPP
