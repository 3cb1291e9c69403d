// gpuflow/pool.hpp — part of gpuflow.hpp (include that): Pool, embedded or connected to the
// node's service, and the Lease a connected pool acquires.
#ifndef GPUFLOW_POOL_HPP
#define GPUFLOW_POOL_HPP

#include "body.hpp"
#include "describe.hpp"

namespace gpuflow {

class Lease;

// ---------------------------------------------------------------------------------------------
// Pool: workers and their devices, embedded in this process or connected to the node's service.
// Thread-safe, like the gf_pool_* functions, except destruction and assignment, which must not
// overlap any other use. Destruction cancels pending tasks and waits for running bodies.

class Pool {
 public:
  Pool() noexcept = default;  // empty
  explicit Pool(PoolConfig config) {
    gf_pool *raw = nullptr;
    detail::check(gf_pool_create(&raw, &config.desc()));
    raw_.reset(raw);
  }
  // A pool connected to a service: "unix:///path.sock", a socket path, or "tcp://HOST:PORT"
  // with the file holding the service's token (empty: GPUFLOW_TOKEN_FILE).
  static Pool connect(std::string endpoint, std::string token_file = {},
                      PoolConfig config = PoolConfig()) {
    return Pool(std::move(config.endpoint(std::move(endpoint)).token_file(std::move(token_file))));
  }
  static Pool adopt(gf_pool *raw) noexcept {
    Pool pool;
    pool.raw_.reset(raw);
    return pool;
  }
  gf_pool *get() const noexcept { return raw_.get(); }
  gf_pool *release_handle() noexcept { return raw_.release(); }
  explicit operator bool() const noexcept { return raw_ != nullptr; }

  uint32_t worker_count() const { return count(gf_pool_worker_count); }
  // The C struct; its name is owned by the pool.
  gf_worker_info worker(uint32_t index) const {
    gf_worker_info info = GF_WORKER_INFO_INIT;
    detail::check(gf_pool_worker_info(&info, get(), index));
    return info;
  }
  // A worker's ledger line for `resource`, or nothing when the worker does not advertise it.
  std::optional<gf_ledger_entry> ledger(uint32_t worker, const std::string &resource) const {
    gf_ledger_entry entry = GF_LEDGER_ENTRY_INIT;
    const gf_status s = gf_pool_ledger_lookup(&entry, get(), worker, resource.c_str());
    if (s == GF_ERR_NOT_FOUND) return std::nullopt;
    detail::check(s);
    return entry;
  }
  uint32_t device_count() const { return count(gf_pool_device_count); }
  gf_device_info device(uint32_t index) const {
    gf_device_info info = GF_DEVICE_INFO_INIT;
    detail::check(gf_pool_device_info(&info, get(), index));
    return info;
  }
  gf_device_memory device_memory(uint32_t index) const {
    gf_device_memory m = GF_DEVICE_MEMORY_INIT;
    detail::check(gf_pool_device_memory(&m, get(), index));
    return m;
  }
  std::string devices_source() const {
    const char *s = nullptr;
    detail::check(gf_pool_devices_source(&s, get()));
    return detail::copy_or_empty(s);
  }
  std::optional<std::string> dashboard_url() const {
    const char *s = nullptr;
    const gf_status st = gf_pool_dashboard_url(&s, get());
    if (st == GF_ERR_NOT_FOUND) return std::nullopt;
    detail::check(st);
    return detail::copy_or_empty(s);
  }

  // Registers a named kernel whose bodies are callables, as task bodies are (a GPU body may be
  // omitted or given alone with nullptr as the CPU one). Stored on the heap: once per pool.
  template <class Cpu, class Gpu = std::nullptr_t>
  void register_kernel(const std::string &name, Cpu &&cpu, Gpu &&gpu = nullptr) {
    detail::Body c = body_or_none(std::forward<Cpu>(cpu));
    detail::Body g = body_or_none(std::forward<Gpu>(gpu));
    detail::BodyBinding binding(c, g, nullptr);
    gf_kernel_desc d = GF_KERNEL_DESC_INIT;
    d.name = name.c_str();
    d.cpu_fn = binding.cpu_fn;
    d.gpu_fn = binding.gpu_fn;
    d.user_data = binding.user_data;
    d.user_data_destroy = binding.destroy;
    detail::check(gf_pool_register_kernel(get(), &d));
    binding.commit();
  }
  void load_plugin(const std::string &path) {
    detail::check(gf_pool_load_plugin(get(), path.c_str()));
  }
  std::vector<std::string> kernel_names() const {
    std::vector<std::string> names(count(gf_pool_kernel_count));
    for (uint32_t i = 0; i < names.size(); ++i) {
      const char *s = nullptr;
      detail::check(gf_pool_kernel_name(&s, get(), i));
      names[i] = detail::copy_or_empty(s);
    }
    return names;
  }
  // The C callback; see gf_pool_set_event_callback for where it runs and what it must not do.
  void set_event_callback(gf_event_fn callback, void *user_data) {
    detail::check(gf_pool_set_event_callback(get(), callback, user_data));
  }

  // Connected pools only: a lease, waiting as long as it takes...
  Lease acquire_lease(LeaseRequest request);
  // ...or at most `timeout` (0: ask once); nothing when it was not granted in time.
  std::optional<Lease> acquire_lease(LeaseRequest request, std::chrono::milliseconds timeout);
  // The service's view of the node (connected pools only): `gpuflow status`'s table or JSON.
  std::string service_status(gf_status_format format = GF_STATUS_TEXT) {
    gf_bytes bytes{nullptr, 0};
    detail::check(gf_pool_service_status(&bytes, get(), format));
    return detail::take_bytes(bytes);
  }

 private:
  uint32_t count(gf_status (*fn)(uint32_t *, const gf_pool *)) const {
    uint32_t n = 0;
    detail::check(fn(&n, get()));
    return n;
  }
  template <class F>
  static detail::Body body_or_none(F &&f) {
    if constexpr (std::is_same_v<std::decay_t<F>, std::nullptr_t>) {
      return {};
    } else {
      return detail::make_body(nullptr, std::forward<F>(f));
    }
  }
  std::unique_ptr<gf_pool, detail::PoolDestroy> raw_;
};

// ---------------------------------------------------------------------------------------------
// Lease: devices and CPUs granted by the node's service to a connected pool. Queries are
// thread-safe; release, bind_process_group, destruction and assignment are externally
// synchronized. Destroying a lease releases it.

// One device of a lease (gf_lease_device, its strings copied).
struct LeaseDevice {
  int32_t ordinal = 0;
  std::string uuid;
  std::string pci_bus_id;  // "" when emulated
  double share = 0.0;      // 1 for a whole device
  uint64_t memory = 0;     // bytes of it
};

class Lease {
 public:
  Lease() noexcept = default;  // empty
  static Lease adopt(gf_lease *raw) noexcept {
    Lease lease;
    lease.raw_.reset(raw);
    return lease;
  }
  gf_lease *get() const noexcept { return raw_.get(); }
  gf_lease *release_handle() noexcept { return raw_.release(); }
  explicit operator bool() const noexcept { return raw_ != nullptr; }

  uint64_t id() const { return info().id; }
  uint32_t device_count() const { return info().device_count; }
  double cpus() const { return info().cpus; }
  LeaseDevice device(uint32_t index) const {
    gf_lease_device d = GF_LEASE_DEVICE_INIT;
    detail::check(gf_lease_device_info(&d, get(), index));
    return {d.ordinal, detail::copy_or_empty(d.uuid), detail::copy_or_empty(d.pci_bus_id), d.share,
            d.memory};
  }
  std::vector<LeaseDevice> devices() const {
    std::vector<LeaseDevice> out;
    for (uint32_t i = 0, n = device_count(); i < n; ++i) out.push_back(device(i));
    return out;
  }
  // "NAME=value\n" lines a process running on the lease needs (CUDA_VISIBLE_DEVICES, ...).
  std::string environment() const {
    const char *s = nullptr;
    detail::check(gf_lease_environment(&s, get()));
    return detail::copy_or_empty(s);
  }
  // True once the service asked for the lease back, or the connection to it is gone.
  bool revoked() const {
    int32_t r = 0;
    detail::check(gf_lease_revoked(&r, get()));
    return r != 0;
  }
  void bind_process_group(int64_t process_group) {
    detail::check(gf_lease_bind_process_group(get(), process_group));
  }
  // Hands the lease back now; throws GF_ERR_SYSTEM when the service is gone (the lease ended with
  // the connection anyway). The lease is empty afterwards either way.
  void release() {
    if (gf_lease *raw = raw_.release()) detail::check(gf_lease_release(raw));
  }

 private:
  struct Info {
    uint64_t id;
    uint32_t device_count;
    double cpus;
  };
  Info info() const {
    Info i{0, 0, 0.0};
    detail::check(gf_lease_info(&i.id, &i.device_count, &i.cpus, get()));
    return i;
  }
  std::unique_ptr<gf_lease, detail::LeaseRelease> raw_;
};

inline Lease Pool::acquire_lease(LeaseRequest request) {
  gf_lease *raw = nullptr;
  detail::check(gf_lease_acquire(&raw, get(), &request.desc(), -1));
  return Lease::adopt(raw);
}

inline std::optional<Lease> Pool::acquire_lease(LeaseRequest request,
                                                std::chrono::milliseconds timeout) {
  gf_lease *raw = nullptr;
  if (!detail::check_timeout(
          gf_lease_acquire(&raw, get(), &request.desc(), detail::to_ms(timeout))))
    return std::nullopt;
  return Lease::adopt(raw);
}

}  // namespace gpuflow

#endif  // GPUFLOW_POOL_HPP
