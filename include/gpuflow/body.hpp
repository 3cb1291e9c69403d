// gpuflow/body.hpp — part of gpuflow.hpp (include that): what a task body sees (TaskContext), and
// how callables become C task bodies: trampolines, and the per-graph arena that stores them.
#ifndef GPUFLOW_BODY_HPP
#define GPUFLOW_BODY_HPP

#include "error.hpp"

namespace gpuflow {

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

struct ArenaRelease {
  void operator()(BodyArena *a) const noexcept { BodyArena::release(a); }
};

}  // namespace detail

}  // namespace gpuflow

#endif  // GPUFLOW_BODY_HPP
