// gpuflow.hpp — C++20 over gpuflow's C ABI (gpuflow.h), header-only.
//
// Every class here owns or borrows a handle of gpuflow.h and calls the C functions; no C++ type
// crosses the library boundary, so this header works with any build of libgpuflow whose major
// version matches (the library itself stays C).
//
// Errors are exceptions: a failed call throws gpuflow::Error, a std::runtime_error carrying the
// gf_status (status()) and the library's message (message(), copied from gf_last_error() right
// after the call, before it can be overwritten). C++20 has no std::expected, and a hand-made
// result type would make every call site check twice; exceptions also carry a body's failure
// out of a task naturally. Outcomes that are not errors never throw: Run::wait_for returns false
// on timeout, Pool::acquire_lease with a timeout returns an empty optional, Run::status returns
// the plain gf_status (the non-throwing escape for hot polling loops), and destructors ignore
// what the C destroy functions report.
//
// Ownership: Pool, Graph, Run, Lease and Service own one handle each, are movable and not
// copyable (the C ABI has no copy). A moved-from or default-constructed object is empty: its
// get() is nullptr and destroying it does nothing. get() lends the C handle for calls this header
// does not wrap; release_handle() hands it over.
//
// Task bodies are callables taking a gpuflow::TaskContext& and returning void; a body fails its
// attempt by throwing (the exception's what() becomes the task's error). No exception ever
// crosses into C: the trampolines that gpuflow calls catch everything. Body storage (see
// Graph::task): empty callables (captureless lambdas) need none, a lone function pointer rides in
// the task's user_data, and anything with state is built once in an arena owned by the graph,
// so adding a task does no heap allocation for its body. Bodies live until gpuflow destroys the
// task's user data: after the graph object and every run of it are gone.
//
// Thread safety follows gpuflow.h and is stated per class.
#ifndef GPUFLOW_HPP
#define GPUFLOW_HPP

#include <gpuflow.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpuflow {

// ---------------------------------------------------------------------------------------------
// Errors

// A failed gpuflow call: its status and the library's message naming the culprit.
class Error : public std::runtime_error {
 public:
  Error(gf_status status, std::string message)
      : std::runtime_error(name(status) + ": " + message),
        status_(status),
        message_(std::move(message)) {}
  gf_status status() const noexcept { return status_; }
  // The library's message alone (what() is "GF_ERR_NAME: message").
  const std::string &message() const noexcept { return message_; }

 private:
  static std::string name(gf_status status) {
    const char *n = gf_status_name(status);
    return n ? n : "GF_STATUS(" + std::to_string(static_cast<int>(status)) + ")";
  }
  gf_status status_;
  std::string message_;
};

namespace detail {

// Copies the message first: gf_status_name is a gpuflow call, after which it would be stale.
[[noreturn]] inline void throw_last(gf_status status) {
  std::string message = gf_last_error();
  throw Error(status, std::move(message));
}
inline void check(gf_status status) {
  if (status != GF_OK) throw_last(status);
}
// For calls where GF_TIMEOUT is an outcome, not an error: true on GF_OK, false on GF_TIMEOUT.
inline bool check_timeout(gf_status status) {
  if (status == GF_TIMEOUT) return false;
  check(status);
  return true;
}
// The C ABI reads NULL (not "") as "unset" for optional strings.
inline const char *c_str_or_null(const std::string &s) {
  return s.empty() ? nullptr : s.c_str();
}
inline std::string copy_or_empty(const char *s) {
  return s ? std::string(s) : std::string();
}
inline int64_t to_ms(std::chrono::milliseconds timeout) {
  return static_cast<int64_t>(timeout.count());
}

}  // namespace detail

// The library loaded at run time, "major.minor.patch" (may differ from this header's minor).
inline std::string_view version() {
  return gf_version_string();
}

// Task and data references are gpuflow.h's small value types, used as they are.
using Task = gf_task;
using Data = gf_data;

// A named amount of a resource: {"GPU", 0.5}, {"gpu_memory", 1 << 30}, {"bigmem", 1}.
struct Resource {
  std::string name;
  double amount = 0.0;
};

// ---------------------------------------------------------------------------------------------
// Inside a task body

// What a running body sees. Borrowed for the call: valid only during it, on its thread.
class TaskContext {
 public:
  explicit TaskContext(gf_task_ctx *raw) noexcept : raw_(raw) {}
  gf_task_ctx *get() const noexcept { return raw_; }

  // Input `index` as bytes, in the executing worker's memory (device memory on a real GPU).
  std::span<const std::byte> input(uint32_t index) const {
    const void *ptr = nullptr;
    uint64_t size = 0;
    detail::check(gf_task_ctx_input(&ptr, &size, raw_, index));
    return {static_cast<const std::byte *>(ptr), static_cast<size_t>(size)};
  }
  // Input `index` as an array of T; throws GF_ERR_INVALID_ARGUMENT if it is not whole and aligned.
  template <class T>
  std::span<const T> input_as(uint32_t index) const {
    static_assert(std::is_trivially_copyable_v<T>, "inputs are viewed as plain data");
    const std::span<const std::byte> bytes = input(index);
    check_view<T>(bytes.data(), bytes.size(), "input", index);
    return {reinterpret_cast<const T *>(bytes.data()), bytes.size() / sizeof(T)};
  }
  // An opaque value input (gf_graph_add_host_value, gf_task_ctx_set_value): the pointer itself.
  void *value(uint32_t index) const {
    const void *ptr = nullptr;
    uint64_t size = 0;
    detail::check(gf_task_ctx_input(&ptr, &size, raw_, index));
    return const_cast<void *>(ptr);
  }

  // Output buffer `index`, `size` bytes: its declared size, or any size for a buffer declared
  // with size 0 (gpuflow.h cannot tell a body the declared size, so it is always given here).
  std::span<std::byte> output(uint32_t index, uint64_t size) const {
    void *ptr = nullptr;
    detail::check(gf_task_ctx_output(&ptr, raw_, index, size));
    return {static_cast<std::byte *>(ptr), static_cast<size_t>(size)};
  }
  // Output buffer `index` as `count` elements of T.
  template <class T>
  std::span<T> output_as(uint32_t index, size_t count) const {
    static_assert(std::is_trivially_copyable_v<T>, "outputs are written as plain data");
    const std::span<std::byte> bytes = output(index, static_cast<uint64_t>(count) * sizeof(T));
    check_view<T>(bytes.data(), bytes.size(), "output", index);
    return {reinterpret_cast<T *>(bytes.data()), count};
  }
  // Sets opaque-value output `index`; on success gpuflow owns `value` and calls destroy on it.
  void set_value(uint32_t index, void *value, gf_destroy_fn destroy,
                 uint64_t size_estimate = 0) const {
    detail::check(gf_task_ctx_set_value(raw_, index, value, destroy, size_estimate));
  }

  // True once the run was cancelled or the pool is shutting down: long bodies may stop early.
  bool cancelled() const noexcept { return gf_task_ctx_cancelled(raw_) != 0; }
  // Where and how this body runs (worker kind, device, attempt, CUDA stream, task name).
  gf_task_env env() const {
    gf_task_env env = GF_TASK_ENV_INIT;
    detail::check(gf_task_ctx_env(&env, raw_));
    return env;
  }

 private:
  template <class T>
  static void check_view(const std::byte *ptr, size_t size, const char *what, uint32_t index) {
    if (size % sizeof(T) != 0 || reinterpret_cast<uintptr_t>(ptr) % alignof(T) != 0) {
      throw Error(GF_ERR_INVALID_ARGUMENT, std::string(what) + " #" + std::to_string(index) + " (" +
                                               std::to_string(size) +
                                               " bytes) is not a whole, aligned array of " +
                                               std::to_string(sizeof(T)) + "-byte elements");
    }
  }
  gf_task_ctx *raw_;
};

namespace detail {

// Where a graph's stateful bodies live: blocks that grow geometrically, so that adding a task
// does not allocate. The graph holds one reference and each stored body another, released when
// gpuflow destroys that task's user data (on any thread, hence the atomic count); the blocks are
// freed with the last. Allocation happens only while the graph is built, on its one thread.
class BodyArena {
 public:
  BodyArena() = default;
  BodyArena(const BodyArena &) = delete;
  BodyArena &operator=(const BodyArena &) = delete;

  void *allocate(size_t size) {
    constexpr size_t align = alignof(std::max_align_t);
    size = (size + align - 1) / align * align;
    if (head_ == nullptr || used_ + size > head_->capacity) {
      const size_t capacity = std::max(next_capacity_, size);
      void *memory = ::operator new(kHeader + capacity);
      head_ = ::new (memory) Block{head_, capacity};
      used_ = 0;
      next_capacity_ = std::min<size_t>(next_capacity_ * 2, size_t{64} << 10);
    }
    void *p = reinterpret_cast<unsigned char *>(head_) + kHeader + used_;
    used_ += size;
    return p;
  }
  void retain() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  static void release(BodyArena *arena) noexcept {
    if (arena->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete arena;
  }

 private:
  struct Block {
    Block *next;
    size_t capacity;
  };
  static constexpr size_t kHeader = (sizeof(Block) + alignof(std::max_align_t) - 1) /
                                    alignof(std::max_align_t) * alignof(std::max_align_t);
  ~BodyArena() {
    while (head_ != nullptr) {
      Block *next = head_->next;
      ::operator delete(static_cast<void *>(head_));
      head_ = next;
    }
  }
  std::atomic<size_t> refs_{1};
  Block *head_ = nullptr;
  size_t used_ = 0;
  size_t next_capacity_ = 1024;
};

// A stored body: how to call and destroy it, and the arena it lives in (nullptr: the heap, for
// kernels registered with a pool, which outlive any graph).
struct Slot {
  void (*call)(const Slot *, TaskContext &);
  void (*destroy)(Slot *) noexcept;
  BodyArena *arena;
};

template <class F>
struct SlotOf final : Slot {
  template <class A>
  SlotOf(BodyArena *a, A &&body) : Slot{&call_it, &destroy_it, a}, f(std::forward<A>(body)) {}
  static void call_it(const Slot *s, TaskContext &ctx) { static_cast<const SlotOf *>(s)->f(ctx); }
  static void destroy_it(Slot *s) noexcept { static_cast<SlotOf *>(s)->~SlotOf(); }
  F f;
};

inline void *allocate(BodyArena *arena, size_t size) {
  return arena ? arena->allocate(size) : ::operator new(size);
}
inline void deallocate(BodyArena *arena, void *p) noexcept {
  if (!arena) ::operator delete(p);
}

template <class F, class A>
Slot *make_slot(BodyArena *arena, A &&body) {
  static_assert(alignof(SlotOf<F>) <= alignof(std::max_align_t), "over-aligned task body");
  void *memory = allocate(arena, sizeof(SlotOf<F>));
  try {
    Slot *slot = ::new (memory) SlotOf<F>(arena, std::forward<A>(body));
    if (arena) arena->retain();
    return slot;
  } catch (...) {
    deallocate(arena, memory);  // arena memory stays unused until the arena goes
    throw;
  }
}
inline void destroy_slot(void *user_data) noexcept {
  Slot *slot = static_cast<Slot *>(user_data);
  BodyArena *arena = slot->arena;
  slot->destroy(slot);
  if (arena) {
    BodyArena::release(arena);
  } else {
    ::operator delete(user_data);
  }
}

// Both bodies of a task that has two stored ones share its one user_data through a pair.
struct SlotPair {
  Slot *cpu;
  Slot *gpu;
  BodyArena *arena;
};
inline void destroy_pair(void *user_data) noexcept {
  SlotPair *pair = static_cast<SlotPair *>(user_data);
  Slot *cpu = pair->cpu, *gpu = pair->gpu;
  deallocate(pair->arena, pair);  // arena memory: the slots' references keep it until here
  destroy_slot(cpu);
  destroy_slot(gpu);
}

// Runs a body and turns whatever it throws into the attempt's failure, so nothing unwinds into C.
template <class Call>
int guarded(gf_task_ctx *raw, const Call &call) noexcept {
  try {
    TaskContext ctx(raw);
    call(ctx);
    return 0;
  } catch (const std::exception &e) {
    gf_task_ctx_fail(raw, e.what());
  } catch (...) {
    gf_task_ctx_fail(raw, "the task body threw a C++ exception that is not a std::exception");
  }
  return 1;
}
template <class F>
int stateless_trampoline(gf_task_ctx *raw, void *) noexcept {
  return guarded(raw, [](TaskContext &ctx) {
    const F f{};
    f(ctx);
  });
}
template <class FnPtr>
int pointer_trampoline(gf_task_ctx *raw, void *user_data) noexcept {
  return guarded(raw, [user_data](TaskContext &ctx) { reinterpret_cast<FnPtr>(user_data)(ctx); });
}
inline int slot_trampoline(gf_task_ctx *raw, void *user_data) noexcept {
  const Slot *slot = static_cast<const Slot *>(user_data);
  return guarded(raw, [slot](TaskContext &ctx) { slot->call(slot, ctx); });
}
inline int pair_cpu_trampoline(gf_task_ctx *raw, void *user_data) noexcept {
  return slot_trampoline(raw, static_cast<SlotPair *>(user_data)->cpu);
}
inline int pair_gpu_trampoline(gf_task_ctx *raw, void *user_data) noexcept {
  return slot_trampoline(raw, static_cast<SlotPair *>(user_data)->gpu);
}

// One body on its way into a task or kernel: a trampoline that needs no state, a function
// pointer to pass as user_data, or a stored slot.
struct Body {
  enum class Kind { kNone, kStateless, kPointer, kSlot } kind = Kind::kNone;
  gf_task_fn trampoline = nullptr;  // kStateless, kPointer
  void *pointer = nullptr;          // kPointer: the function, as user_data
  Slot *slot = nullptr;             // kSlot
  Slot *(*pointer_to_slot)(BodyArena *, void *) = nullptr;

  Body() = default;
  Body(Body &&o) noexcept { *this = std::move(o); }
  Body &operator=(Body &&o) noexcept {
    if (this != &o) {
      reset();
      kind = std::exchange(o.kind, Kind::kNone);
      trampoline = o.trampoline;
      pointer = o.pointer;
      slot = std::exchange(o.slot, nullptr);
      pointer_to_slot = o.pointer_to_slot;
    }
    return *this;
  }
  ~Body() { reset(); }
  void reset() noexcept {
    if (slot) destroy_slot(std::exchange(slot, nullptr));
    kind = Kind::kNone;
  }
  bool needs_user_data() const noexcept { return kind == Kind::kPointer || kind == Kind::kSlot; }
  // Stores a function-pointer body too, for a task whose other body also needs the user_data.
  void to_slot(BodyArena *arena) {
    if (kind == Kind::kPointer) {
      slot = pointer_to_slot(arena, pointer);
      kind = Kind::kSlot;
    }
  }
};

template <class F>
Body make_body(BodyArena *arena, F &&f) {
  using D = std::decay_t<F>;
  static_assert(std::is_invocable_v<const D &, TaskContext &>,
                "a task body is callable as body(gpuflow::TaskContext&) through a const "
                "reference: runs of one graph may call it from several threads at once");
  static_assert(std::is_void_v<std::invoke_result_t<const D &, TaskContext &>>,
                "a task body returns void and throws to fail its attempt");
  Body body;
  if constexpr (std::is_pointer_v<D> && std::is_function_v<std::remove_pointer_t<D>>) {
    const D fn = f;
    if (fn == nullptr) throw Error(GF_ERR_INVALID_ARGUMENT, "a task body is a null function");
    body.kind = Body::Kind::kPointer;
    body.trampoline = &pointer_trampoline<D>;
    body.pointer = reinterpret_cast<void *>(fn);
    body.pointer_to_slot = [](BodyArena *a, void *p) {
      return make_slot<D>(a, reinterpret_cast<D>(p));
    };
  } else if constexpr (std::is_empty_v<D> && std::is_default_constructible_v<D>) {
    body.kind = Body::Kind::kStateless;
    body.trampoline = &stateless_trampoline<D>;
  } else {
    body.kind = Body::Kind::kSlot;
    body.slot = make_slot<D>(arena, std::forward<F>(f));
  }
  return body;
}

// Fills the body fields of a C descriptor from up to two bodies, and then owns nothing: the
// caller calls commit() once the C call took ownership of user_data, or lets the destructor
// free what was built when it failed.
class BodyBinding {
 public:
  BodyBinding(Body &cpu, Body &gpu, BodyArena *arena) : cpu_(cpu), gpu_(gpu) {
    if (cpu.needs_user_data() && gpu.needs_user_data()) {
      cpu.to_slot(arena);
      gpu.to_slot(arena);
      void *memory = allocate(arena, sizeof(SlotPair));
      pair_ = ::new (memory) SlotPair{cpu.slot, gpu.slot, arena};
      cpu_fn = &pair_cpu_trampoline;
      gpu_fn = &pair_gpu_trampoline;
      user_data = pair_;
      destroy = &destroy_pair;
      return;
    }
    cpu_fn = bind(cpu);
    gpu_fn = bind(gpu);
  }
  BodyBinding(const BodyBinding &) = delete;
  BodyBinding &operator=(const BodyBinding &) = delete;
  ~BodyBinding() {
    if (pair_ && !committed_) deallocate(pair_->arena, pair_);
  }
  // The C call succeeded: gpuflow owns the slots now, through `destroy`.
  void commit() noexcept {
    committed_ = true;
    cpu_.slot = nullptr;
    gpu_.slot = nullptr;
    cpu_.kind = gpu_.kind = Body::Kind::kNone;
  }

  gf_task_fn cpu_fn = nullptr;
  gf_task_fn gpu_fn = nullptr;
  void *user_data = nullptr;
  gf_destroy_fn destroy = nullptr;

 private:
  gf_task_fn bind(const Body &b) {
    switch (b.kind) {
      case Body::Kind::kNone:
        return nullptr;
      case Body::Kind::kStateless:
        return b.trampoline;
      case Body::Kind::kPointer:
        user_data = b.pointer;
        return b.trampoline;
      case Body::Kind::kSlot:
        user_data = b.slot;
        destroy = &destroy_slot;
        return &slot_trampoline;
    }
    return nullptr;
  }
  Body &cpu_;
  Body &gpu_;
  SlotPair *pair_ = nullptr;
  bool committed_ = false;
};

struct PoolDestroy {
  void operator()(gf_pool *p) const noexcept { gf_pool_destroy(p); }
};
struct GraphDestroy {
  void operator()(gf_graph *g) const noexcept { gf_graph_destroy(g); }
};
struct RunDestroy {
  void operator()(gf_run *r) const noexcept { gf_run_destroy(r); }
};
struct LeaseRelease {
  void operator()(gf_lease *l) const noexcept { (void)gf_lease_release(l); }
};
struct ServiceStop {
  void operator()(gf_service *s) const noexcept { gf_service_stop(s); }
};
struct ArenaRelease {
  void operator()(BodyArena *a) const noexcept { BodyArena::release(a); }
};

// Library-owned bytes (gf_bytes) copied into a string and freed.
inline std::string take_bytes(gf_bytes &bytes) {
  std::string out;
  try {
    out.assign(static_cast<const char *>(bytes.data), static_cast<size_t>(bytes.size));
  } catch (...) {
    gf_bytes_free(&bytes);
    throw;
  }
  gf_bytes_free(&bytes);
  return out;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Descriptions: builders over gpuflow.h's descriptor structs. Each keeps copies of its strings
// and lists; desc() gives the C struct as gpuflow sees it, pointing into the builder, valid
// until the builder changes or goes.

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

class Pool;
class Run;
class Lease;
class TaskBuilder;

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
// Graph: tasks and data objects, built on one thread, then submitted any number of times.
// Externally synchronized while it is built (as gf_graph_* are); submit and check may run on any
// thread once nothing modifies it. Destroying it leaves its runs running: they keep what they
// need, task bodies included.

class Graph {
 public:
  Graph() {
    gf_graph *raw = nullptr;
    detail::check(gf_graph_create(&raw));
    raw_.reset(raw);
  }
  static Graph adopt(gf_graph *raw) noexcept { return Graph(raw); }
  // Reads a graph document (binary or JSON); frozen unless flags has GF_DESERIALIZE_MUTABLE.
  static Graph deserialize(std::string_view bytes, gf_graph_format format = GF_GRAPH_FORMAT_AUTO,
                           uint32_t flags = 0) {
    gf_graph *raw = nullptr;
    detail::check(gf_graph_deserialize(&raw, bytes.data(), bytes.size(), format, flags));
    return Graph(raw);
  }
  gf_graph *get() const noexcept { return raw_.get(); }
  explicit operator bool() const noexcept { return raw_ != nullptr; }

  Data add_buffer(Buffer buffer) {
    Data d{0};
    detail::check(gf_graph_add_buffer(&d, get(), &buffer.desc()));
    return d;
  }
  // An opaque value slot a task fills with TaskContext::set_value.
  Data add_value(const std::string &name, uint64_t size_estimate = 0, uint32_t flags = 0) {
    Data d{0};
    detail::check(gf_graph_add_value(&d, get(), detail::c_str_or_null(name), size_estimate, flags));
    return d;
  }
  // A host input, copied now; with GF_HOST_BUFFER_BORROW the bytes must outlive every run.
  Data add_host_buffer(const std::string &name, std::span<const std::byte> bytes,
                       uint32_t flags = 0) {
    Data d{0};
    detail::check(gf_graph_add_host_buffer(&d, get(), detail::c_str_or_null(name), bytes.data(),
                                           bytes.size(), flags));
    return d;
  }
  template <class T>
  Data add_host_buffer(const std::string &name, std::span<const T> values, uint32_t flags = 0) {
    static_assert(std::is_trivially_copyable_v<T>, "host buffers hold plain data");
    return add_host_buffer(name, std::as_bytes(values), flags);
  }
  // An opaque host value; the graph owns it on success and calls destroy(value) at the end.
  Data add_host_value(const std::string &name, void *value, gf_destroy_fn destroy,
                      uint64_t size_estimate = 0) {
    Data d{0};
    detail::check(gf_graph_add_host_value(&d, get(), detail::c_str_or_null(name), value, destroy,
                                          size_estimate));
    return d;
  }

  // Starts describing a task of this graph; TaskBuilder::add() adds it. The builder refers to
  // this graph: finish it before moving or destroying the graph.
  TaskBuilder task(std::string name = {});

  void add_dependency(Task task, Task before) {
    detail::check(gf_graph_add_dependency(get(), task, before));
  }
  uint64_t task_count() const { return count(gf_graph_task_count); }
  uint64_t data_count() const { return count(gf_graph_data_count); }
  Task task_at(uint64_t index) const {
    Task t{0};
    detail::check(gf_graph_task_at(&t, get(), index));
    return t;
  }
  Data data_at(uint64_t index) const {
    Data d{0};
    detail::check(gf_graph_data_at(&d, get(), index));
    return d;
  }
  void set_metadata(const std::string &key, const std::string &value) {
    detail::check(gf_graph_set_metadata(get(), key.c_str(), value.c_str()));
  }
  std::vector<std::pair<std::string, std::string>> metadata() const {
    uint32_t n = 0;
    detail::check(gf_graph_metadata_count(&n, get()));
    std::vector<std::pair<std::string, std::string>> out;
    for (uint32_t i = 0; i < n; ++i) {
      const char *k = nullptr, *v = nullptr;
      detail::check(gf_graph_metadata_get(&k, &v, get(), i));
      out.emplace_back(detail::copy_or_empty(k), detail::copy_or_empty(v));
    }
    return out;
  }
  // The graph as a document (bytes of FlatBuffers, or JSON text). Only kernel and command
  // bodies can be written: a task with a C++ body is refused, naming it.
  std::string serialize(gf_graph_format format = GF_GRAPH_FORMAT_JSON) const {
    gf_bytes bytes{nullptr, 0};
    detail::check(gf_graph_serialize(&bytes, get(), format));
    return detail::take_bytes(bytes);
  }
  // Checks the graph against the pool as submit does, and freezes it, without running it.
  void check(Pool &pool) { detail::check(gf_graph_check(get(), pool.get())); }
  Run submit(Pool &pool, const SubmitOptions &options = {});

 private:
  friend class TaskBuilder;
  explicit Graph(gf_graph *raw) noexcept : raw_(raw) {}
  uint64_t count(gf_status (*fn)(uint64_t *, const gf_graph *)) const {
    uint64_t n = 0;
    detail::check(fn(&n, get()));
    return n;
  }
  detail::BodyArena *arena() {
    if (!arena_) arena_.reset(new detail::BodyArena);
    return arena_.get();
  }
  // Declared first so that it is released last, after gf_graph_destroy dropped our reference.
  std::unique_ptr<detail::BodyArena, detail::ArenaRelease> arena_;
  std::unique_ptr<gf_graph, detail::GraphDestroy> raw_;
};

// A task being described (gf_task_desc), bound to its graph. Exactly one kind of body: C++
// callables for CPU and/or GPU workers, C callbacks, a kernel name, or a command. Used on the
// graph's thread; add() may be called once.
class TaskBuilder {
 public:
  TaskBuilder(const TaskBuilder &) = delete;
  TaskBuilder &operator=(const TaskBuilder &) = delete;
  TaskBuilder(TaskBuilder &&) noexcept = default;
  TaskBuilder &operator=(TaskBuilder &&) noexcept = default;

  // The body for CPU workers: any callable `void(gpuflow::TaskContext&)`, called through a const
  // reference, possibly on several threads at once (runs of one graph overlap).
  template <class F>
  TaskBuilder &cpu(F &&body) {
    cpu_ = detail::make_body(graph_->arena(), std::forward<F>(body));
    return *this;
  }
  // The body for GPU workers (device pointers; TaskContext::env().stream on CUDA).
  template <class F>
  TaskBuilder &gpu(F &&body) {
    gpu_ = detail::make_body(graph_->arena(), std::forward<F>(body));
    return *this;
  }
  // C callbacks and their user data, as gf_task_desc takes them; destroy owns user_data once
  // add() succeeds.
  TaskBuilder &c_bodies(gf_task_fn cpu_fn, gf_task_fn gpu_fn, void *user_data,
                        gf_destroy_fn destroy = nullptr) {
    c_.cpu_fn = cpu_fn, c_.gpu_fn = gpu_fn, c_.user_data = user_data;
    c_.user_data_destroy = destroy;
    return *this;
  }
  TaskBuilder &kernel(std::string name) { return kernel_ = std::move(name), *this; }
  TaskBuilder &command(Command command) { return command_ = std::move(command), *this; }

  TaskBuilder &resource(std::string name, double amount) {
    return resources_.push_back({std::move(name), amount}), *this;
  }
  TaskBuilder &resources(std::initializer_list<Resource> list) {
    return resources_.insert(resources_.end(), list), *this;
  }
  TaskBuilder &inputs(std::initializer_list<Data> list) {
    return inputs_.insert(inputs_.end(), list), *this;
  }
  TaskBuilder &inputs(std::span<const Data> list) {
    return inputs_.insert(inputs_.end(), list.begin(), list.end()), *this;
  }
  TaskBuilder &outputs(std::initializer_list<Data> list) {
    return outputs_.insert(outputs_.end(), list), *this;
  }
  TaskBuilder &outputs(std::span<const Data> list) {
    return outputs_.insert(outputs_.end(), list.begin(), list.end()), *this;
  }
  TaskBuilder &after(std::initializer_list<Task> list) {
    return after_.insert(after_.end(), list), *this;
  }
  TaskBuilder &priority(int32_t v) { return c_.priority = v, *this; }
  TaskBuilder &retries(uint32_t v) { return c_.retries = v, *this; }
  TaskBuilder &cost_key(std::string key) { return cost_key_ = std::move(key), *this; }

  // The descriptor as gf_graph_add_task will see it, body fields aside (add() fills those).
  const gf_task_desc &desc() {
    c_.name = detail::c_str_or_null(name_);
    c_resources_.clear();
    for (const Resource &r : resources_) c_resources_.push_back({r.name.c_str(), r.amount});
    c_.resources = c_resources_.empty() ? nullptr : c_resources_.data();
    c_.resource_count = static_cast<uint32_t>(c_resources_.size());
    c_.inputs = inputs_.empty() ? nullptr : inputs_.data();
    c_.input_count = static_cast<uint32_t>(inputs_.size());
    c_.outputs = outputs_.empty() ? nullptr : outputs_.data();
    c_.output_count = static_cast<uint32_t>(outputs_.size());
    c_.after = after_.empty() ? nullptr : after_.data();
    c_.after_count = static_cast<uint32_t>(after_.size());
    c_.kernel = detail::c_str_or_null(kernel_);
    c_.command = command_ ? &command_->desc() : nullptr;
    c_.cost_key = detail::c_str_or_null(cost_key_);
    return c_;
  }

  // Adds the task. On success its bodies belong to the graph (and its runs); on failure they are
  // destroyed with the builder and nothing was added.
  Task add() {
    if (added_) throw Error(GF_ERR_STATE, "this TaskBuilder has already added its task");
    const bool cpp_bodies =
        cpu_.kind != detail::Body::Kind::kNone || gpu_.kind != detail::Body::Kind::kNone;
    if (cpp_bodies && (c_.cpu_fn || c_.gpu_fn)) {
      throw Error(GF_ERR_INVALID_ARGUMENT,
                  "task '" + name_ + "' has both C++ bodies and C callbacks");
    }
    gf_task_desc d = desc();
    // Two bodies that both need the user_data share it through a pair, stored in the arena.
    detail::BodyBinding binding(
        cpu_, gpu_, cpu_.needs_user_data() && gpu_.needs_user_data() ? graph_->arena() : nullptr);
    if (cpp_bodies) {
      d.cpu_fn = binding.cpu_fn;
      d.gpu_fn = binding.gpu_fn;
      d.user_data = binding.user_data;
      d.user_data_destroy = binding.destroy;
    }
    Task t{0};
    detail::check(gf_graph_add_task(&t, graph_->get(), &d));
    binding.commit();
    added_ = true;
    return t;
  }

 private:
  friend class Graph;
  TaskBuilder(Graph &graph, std::string name) : graph_(&graph), name_(std::move(name)) {
    gf_task_desc_init(&c_, sizeof c_);
  }
  Graph *graph_;
  std::string name_, kernel_, cost_key_;
  std::optional<Command> command_;
  std::vector<Resource> resources_;
  std::vector<gf_resource> c_resources_;
  std::vector<Data> inputs_, outputs_;
  std::vector<Task> after_;
  gf_task_desc c_;
  detail::Body cpu_, gpu_;
  bool added_ = false;
};

inline TaskBuilder Graph::task(std::string name) {
  return TaskBuilder(*this, std::move(name));
}

// ---------------------------------------------------------------------------------------------
// Run: one execution of a graph on a pool, a future. Thread-safe, except destruction and
// assignment. Destroying a run that is still running cancels it.

class Run {
 public:
  Run() noexcept = default;  // empty
  static Run adopt(gf_run *raw) noexcept {
    Run run;
    run.raw_.reset(raw);
    return run;
  }
  gf_run *get() const noexcept { return raw_.get(); }
  gf_run *release_handle() noexcept { return raw_.release(); }
  explicit operator bool() const noexcept { return raw_ != nullptr; }

  // Waits until the run finishes; throws GF_ERR_TASK_FAILED (naming the first failed task and
  // its error) or GF_ERR_CANCELLED.
  void wait() const { detail::check(gf_run_wait(get(), -1)); }
  // Waits at most `timeout`: false when still running; throws as wait() does.
  bool wait_for(std::chrono::milliseconds timeout) const {
    return detail::check_timeout(gf_run_wait(get(), detail::to_ms(timeout)));
  }
  // gf_run_wait without exceptions: GF_OK, GF_TIMEOUT or the error (message: gf_last_error()).
  gf_status status(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) const noexcept {
    return gf_run_wait(get(), detail::to_ms(timeout));
  }
  gf_run_state state() const {
    gf_run_state s = GF_RUN_RUNNING;
    detail::check(gf_run_state_get(&s, get()));
    return s;
  }
  void cancel() const { detail::check(gf_run_cancel(get())); }
  // Readable once the run finished; owned by the run.
  int fd() const {
    int fd = -1;
    detail::check(gf_run_fd(&fd, get()));
    return fd;
  }
  gf_run_where where() const {
    gf_run_where w = GF_RUN_ANYWHERE;
    detail::check(gf_run_where_get(&w, get()));
    return w;
  }
  gf_run_stats stats() const {
    gf_run_stats s = GF_RUN_STATS_INIT;
    detail::check(gf_run_stats_get(&s, get()));
    return s;
  }

  gf_task_state task_state(Task task) const {
    gf_task_state s = GF_TASK_WAITING;
    detail::check(gf_run_task_state(&s, get(), task));
    return s;
  }
  std::string task_error(Task task) const {
    const char *s = nullptr;
    detail::check(gf_run_task_error(&s, get(), task));
    return detail::copy_or_empty(s);
  }
  uint32_t task_attempts(Task task) const {
    uint32_t n = 0;
    detail::check(gf_run_task_attempts(&n, get(), task));
    return n;
  }
  uint32_t task_worker(Task task) const {
    uint32_t w = 0;
    detail::check(gf_run_task_worker(&w, get(), task));
    return w;
  }

  // The size of a kept buffer (or host input) once produced.
  uint64_t size_of(Data data) const {
    uint64_t size = 0;
    detail::check(gf_run_fetch(&size, get(), data, nullptr, 0));
    return size;
  }
  // Copies the buffer into dst (at least its size); returns the size.
  uint64_t fetch(Data data, std::span<std::byte> dst) const {
    uint64_t size = 0;
    detail::check(gf_run_fetch(&size, get(), data, dst.data(), dst.size()));
    return size;
  }
  // The buffer as elements of T; throws GF_ERR_INVALID_ARGUMENT when its size is no multiple.
  template <class T = std::byte>
  std::vector<T> fetch(Data data) const {
    static_assert(std::is_trivially_copyable_v<T>, "buffers are read as plain data");
    const uint64_t size = size_of(data);
    if (size % sizeof(T) != 0) {
      throw Error(GF_ERR_INVALID_ARGUMENT, "buffer of " + std::to_string(size) +
                                               " bytes is no array of " +
                                               std::to_string(sizeof(T)) + "-byte elements");
    }
    std::vector<T> out(static_cast<size_t>(size / sizeof(T)));
    fetch(data, std::as_writable_bytes(std::span<T>(out)));
    return out;
  }
  // A buffer holding exactly one T.
  template <class T>
  T fetch_one(Data data) const {
    static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>);
    T value{};
    const uint64_t size = fetch(data, std::as_writable_bytes(std::span<T, 1>(&value, 1)));
    if (size != sizeof(T)) {
      throw Error(GF_ERR_INVALID_ARGUMENT, "buffer of " + std::to_string(size) +
                                               " bytes is not one " + std::to_string(sizeof(T)) +
                                               "-byte value");
    }
    return value;
  }
  // An opaque value, borrowed until the run is destroyed.
  void *value(Data data) const {
    void *v = nullptr;
    detail::check(gf_run_value(&v, get(), data));
    return v;
  }

 private:
  std::unique_ptr<gf_run, detail::RunDestroy> raw_;
};

inline Run Graph::submit(Pool &pool, const SubmitOptions &options) {
  gf_submit_options o = GF_SUBMIT_OPTIONS_INIT;
  o.where = options.where;
  o.on_complete = options.on_complete;
  o.user_data = options.user_data;
  gf_run *raw = nullptr;
  detail::check(gf_graph_submit(&raw, pool.get(), get(), &o));
  return Run::adopt(raw);
}

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

// ---------------------------------------------------------------------------------------------
// Service: the node's shared pool, run on a thread of this process (gf_service_start), for
// tests, tools and single-node deployments. Thread-safe; stopping (destruction, assignment) is
// externally synchronized and never from its log function.

class ServiceConfig {
 public:
  ServiceConfig() { c_ = GF_SERVICE_CONFIG_INIT; }
  // Called with each line the service logs, on its thread; must not call into the service.
  // Exceptions it throws are dropped: they may not cross into C.
  using LogFn = std::function<void(std::string_view)>;
  ServiceConfig &pool(PoolConfig v) { return pool_ = std::move(v), *this; }
  ServiceConfig &socket_path(std::string v) { return socket_path_ = std::move(v), *this; }
  ServiceConfig &group(std::string v) { return group_ = std::move(v), *this; }
  ServiceConfig &usage_half_life_s(double v) { return c_.usage_half_life_s = v, *this; }
  ServiceConfig &client_gpu_cap(double v) { return c_.client_gpu_cap = v, *this; }
  ServiceConfig &user_gpu_cap(double v) { return c_.user_gpu_cap = v, *this; }
  ServiceConfig &user_weights(std::string v) { return user_weights_ = std::move(v), *this; }
  ServiceConfig &dashboard(std::string v) { return dashboard_ = std::move(v), *this; }
  ServiceConfig &plugin(std::string path) { return plugins_.push_back(std::move(path)), *this; }
  ServiceConfig &listen(std::string v) { return listen_ = std::move(v), *this; }
  ServiceConfig &token_file(std::string v) { return token_file_ = std::move(v), *this; }
  ServiceConfig &job_kill_grace_s(double v) { return c_.job_kill_grace_s = v, *this; }
  ServiceConfig &listen_fd(int32_t fd) { return c_.listen_fd = fd, *this; }
  ServiceConfig &log(LogFn fn) { return log_ = std::move(fn), *this; }

  // The C struct, log fields aside (Service sets them to a function it keeps alive).
  const gf_service_config &desc() {
    c_.pool = pool_ ? &pool_->desc() : nullptr;
    c_.socket_path = detail::c_str_or_null(socket_path_);
    c_.group = detail::c_str_or_null(group_);
    c_.user_weights = detail::c_str_or_null(user_weights_);
    c_.dashboard = detail::c_str_or_null(dashboard_);
    c_plugins_.clear();
    for (const std::string &p : plugins_) c_plugins_.push_back(p.c_str());
    c_.plugins = c_plugins_.empty() ? nullptr : c_plugins_.data();
    c_.plugin_count = static_cast<uint32_t>(c_plugins_.size());
    c_.listen = detail::c_str_or_null(listen_);
    c_.token_file = detail::c_str_or_null(token_file_);
    return c_;
  }

 private:
  friend class Service;
  gf_service_config c_;
  std::optional<PoolConfig> pool_;
  std::string socket_path_, group_, user_weights_, dashboard_, listen_, token_file_;
  std::vector<std::string> plugins_;
  std::vector<const char *> c_plugins_;
  LogFn log_;
};

class Service {
 public:
  Service() noexcept = default;  // empty
  Service(Service &&) noexcept = default;
  // Stops this service first, then takes the other's (its log function stays with it).
  Service &operator=(Service &&other) noexcept {
    if (this != &other) {
      stop();
      raw_ = std::move(other.raw_);
      log_ = std::move(other.log_);
    }
    return *this;
  }
  ~Service() = default;
  explicit Service(ServiceConfig config) {
    gf_service_config c = config.desc();
    if (config.log_) {
      log_ = std::make_unique<ServiceConfig::LogFn>(std::move(config.log_));
      c.log = &log_line;
      c.log_user_data = log_.get();
    }
    gf_service *raw = nullptr;
    detail::check(gf_service_start(&raw, &c));
    raw_.reset(raw);
  }
  gf_service *get() const noexcept { return raw_.get(); }
  explicit operator bool() const noexcept { return raw_ != nullptr; }

  // Where local clients connect: "unix:///…" (Pool::connect takes it).
  std::string endpoint() const { return detail::copy_or_empty(gf_service_endpoint(get())); }
  // Where clients of other hosts connect, "tcp://HOST:PORT", when it listens for them.
  std::optional<std::string> remote_endpoint() const {
    const char *s = gf_service_remote_endpoint(get());
    return s ? std::optional<std::string>(s) : std::nullopt;
  }
  std::optional<std::string> dashboard_url() const {
    const char *s = gf_service_dashboard_url(get());
    return s ? std::optional<std::string>(s) : std::nullopt;
  }
  // Replaces the fair-share policy (user_weights, caps, half life); other fields are ignored.
  void update_policy(ServiceConfig policy) {
    detail::check(gf_service_update_policy(get(), &policy.desc()));
  }
  // Stops it now: clients are disconnected, leases end. Also what destruction does.
  void stop() noexcept {
    raw_.reset();
    log_.reset();
  }

 private:
  static void log_line(const char *line, void *user_data) noexcept {
    try {
      (*static_cast<ServiceConfig::LogFn *>(user_data))(line ? line : "");
    } catch (...) {  // nothing may unwind into the service's thread
    }
  }
  // Declared first so that the function outlives the service, which calls it until stopped.
  std::unique_ptr<ServiceConfig::LogFn> log_;
  std::unique_ptr<gf_service, detail::ServiceStop> raw_;
};

}  // namespace gpuflow

#endif  // GPUFLOW_HPP
