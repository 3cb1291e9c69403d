// Shared helpers for the black-box API tests: RAII handles, task builders, bounded waits.
// Everything here uses gpuflow.h only.
#pragma once

#include <gpuflow.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gft {

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------
// RAII handles

struct PoolDeleter {
  void operator()(gf_pool *p) const { gf_pool_destroy(p); }
};
struct GraphDeleter {
  void operator()(gf_graph *g) const { gf_graph_destroy(g); }
};
struct RunDeleter {
  void operator()(gf_run *r) const { gf_run_destroy(r); }
};
using Pool = std::unique_ptr<gf_pool, PoolDeleter>;
using Graph = std::unique_ptr<gf_graph, GraphDeleter>;
using RunPtr = std::unique_ptr<gf_run, RunDeleter>;

// The message of the last error on this thread, copied (the library's pointer is short-lived).
inline std::string last_error() {
  const char *m = gf_last_error();
  return m ? std::string(m) : std::string("<gf_last_error returned NULL>");
}

// "GF_ERR_X: message" for a failed status, evaluated right after the call.
inline std::string describe(gf_status s) {
  std::string msg = last_error();
  const char *n = gf_status_name(s);
  return std::string(n ? n : "?") + " (" + std::to_string(static_cast<int>(s)) + "): " + msg;
}

#define GF_ASSERT_OK(expr)                                                \
  do {                                                                    \
    const gf_status gf_s_ = (expr);                                       \
    ASSERT_EQ(gf_s_, GF_OK) << #expr << " -> " << ::gft::describe(gf_s_); \
  } while (0)

#define GF_EXPECT_OK(expr)                                                \
  do {                                                                    \
    const gf_status gf_s_ = (expr);                                       \
    EXPECT_EQ(gf_s_, GF_OK) << #expr << " -> " << ::gft::describe(gf_s_); \
  } while (0)

// Expects status `want` and returns the error message (copied right after the call).
#define GF_EXPECT_STATUS(want, expr)                                                       \
  [&]() -> std::string {                                                                   \
    const gf_status gf_s_ = (expr);                                                        \
    std::string gf_m_ = ::gft::last_error();                                               \
    EXPECT_EQ(gf_s_, (want)) << #expr << " -> " << gf_status_name(gf_s_) << ": " << gf_m_; \
    return gf_m_;                                                                          \
  }()

// A host-backend config: no real GPU is ever used, whatever the machine has.
inline gf_pool_config host_config(int32_t cpu_workers, int32_t emulated_devices,
                                  uint64_t device_memory = 64ull << 20, double bandwidth = 1e10,
                                  uint32_t gpu_threads = 2) {
  gf_pool_config c = GF_POOL_CONFIG_INIT;
  c.backend = GF_BACKEND_HOST;
  c.cpu_workers = cpu_workers;
  c.emulated_devices = emulated_devices;
  c.emulated_device_memory = device_memory;
  c.emulated_bandwidth = bandwidth;
  c.gpu_worker_threads = gpu_threads;
  return c;
}

inline Pool make_pool(const gf_pool_config &c) {
  gf_pool *p = nullptr;
  const gf_status s = gf_pool_create(&p, &c);
  EXPECT_EQ(s, GF_OK) << "gf_pool_create -> " << describe(s);
  return Pool(p);
}

inline Graph make_graph() {
  gf_graph *g = nullptr;
  const gf_status s = gf_graph_create(&g);
  EXPECT_EQ(s, GF_OK) << "gf_graph_create -> " << describe(s);
  return Graph(g);
}

// ---------------------------------------------------------------------------------------------
// Task bodies as std::function, owned by the graph through user_data_destroy.

using Body = std::function<int(gf_task_ctx *)>;

struct Bodies {
  Body cpu;
  Body gpu;
};

extern "C" inline int gft_call_cpu(gf_task_ctx *ctx, void *ud) {
  return static_cast<Bodies *>(ud)->cpu(ctx);
}
extern "C" inline int gft_call_gpu(gf_task_ctx *ctx, void *ud) {
  return static_cast<Bodies *>(ud)->gpu(ctx);
}
extern "C" inline void gft_delete_bodies(void *ud) {
  delete static_cast<Bodies *>(ud);
}

struct TaskSpec {
  std::string name;                    // empty: unnamed
  Body cpu;                            // empty: no CPU body
  Body gpu;                            // empty: no GPU body
  std::vector<gf_resource> resources;  // names must outlive the add call (literals are fine)
  int32_t priority = 0;
  uint32_t retries = 0;
  std::vector<gf_data> inputs;
  std::vector<gf_data> outputs;
  std::vector<gf_task> after;
  std::string cost_key;  // empty: NULL (derived)
};

// Adds a task; on failure the bodies are freed here (the library must not have taken them).
inline gf_status add_task(gf_task *out, gf_graph *g, const TaskSpec &spec) {
  auto *bodies = new Bodies{spec.cpu, spec.gpu};
  gf_task_desc d = GF_TASK_DESC_INIT;
  d.name = spec.name.empty() ? nullptr : spec.name.c_str();
  d.cpu_fn = spec.cpu ? gft_call_cpu : nullptr;
  d.gpu_fn = spec.gpu ? gft_call_gpu : nullptr;
  d.user_data = bodies;
  d.user_data_destroy = gft_delete_bodies;
  d.resources = spec.resources.empty() ? nullptr : spec.resources.data();
  d.resource_count = static_cast<uint32_t>(spec.resources.size());
  d.priority = spec.priority;
  d.retries = spec.retries;
  d.inputs = spec.inputs.empty() ? nullptr : spec.inputs.data();
  d.input_count = static_cast<uint32_t>(spec.inputs.size());
  d.outputs = spec.outputs.empty() ? nullptr : spec.outputs.data();
  d.output_count = static_cast<uint32_t>(spec.outputs.size());
  d.after = spec.after.empty() ? nullptr : spec.after.data();
  d.after_count = static_cast<uint32_t>(spec.after.size());
  d.cost_key = spec.cost_key.empty() ? nullptr : spec.cost_key.c_str();
  const gf_status s = gf_graph_add_task(out, g, &d);
  if (s != GF_OK) delete bodies;
  return s;
}

// Adds a task and fails the test (returning {0}) if that does not work.
inline gf_task must_add_task(gf_graph *g, const TaskSpec &spec) {
  gf_task t{0};
  const gf_status s = add_task(&t, g, spec);
  EXPECT_EQ(s, GF_OK) << "add_task(" << spec.name << ") -> " << describe(s);
  return t;
}

inline gf_data must_add_buffer(gf_graph *g, const char *name, uint64_t size, uint32_t flags = 0) {
  gf_buffer_desc b = GF_BUFFER_DESC_INIT;
  b.name = name;
  b.size = size;
  b.flags = flags;
  gf_data d{0};
  const gf_status s = gf_graph_add_buffer(&d, g, &b);
  EXPECT_EQ(s, GF_OK) << "gf_graph_add_buffer(" << (name ? name : "") << ") -> " << describe(s);
  return d;
}

inline gf_run *submit(gf_pool *pool, gf_graph *g, const gf_submit_options *opts = nullptr) {
  gf_run *r = nullptr;
  const gf_status s = gf_graph_submit(&r, pool, g, opts);
  EXPECT_EQ(s, GF_OK) << "gf_graph_submit -> " << describe(s);
  return r;
}

// A body that counts its invocations and succeeds.
inline Body counting_body(std::shared_ptr<std::atomic<int>> counter) {
  return [counter](gf_task_ctx *) {
    counter->fetch_add(1);
    return 0;
  };
}

// ---------------------------------------------------------------------------------------------
// Bounded waiting: never a timing assertion, only a guard against hangs.

template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds timeout = 20000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

constexpr int64_t kWaitMs = 30000;  // generous limit for gf_run_wait

inline gf_task_env task_env(gf_task_ctx *ctx) {
  gf_task_env env = GF_TASK_ENV_INIT;
  const gf_status s = gf_task_ctx_env(&env, ctx);
  EXPECT_EQ(s, GF_OK) << "gf_task_ctx_env -> " << describe(s);
  return env;
}

inline uint32_t worker_count(const gf_pool *pool) {
  uint32_t n = 0;
  const gf_status s = gf_pool_worker_count(&n, pool);
  EXPECT_EQ(s, GF_OK) << describe(s);
  return n;
}

inline gf_worker_info worker_info(const gf_pool *pool, uint32_t w) {
  gf_worker_info info = GF_WORKER_INFO_INIT;
  const gf_status s = gf_pool_worker_info(&info, pool, w);
  EXPECT_EQ(s, GF_OK) << describe(s);
  return info;
}

// Ledger line of `resource` on worker w; capacity -1 when the worker does not advertise it.
inline gf_ledger_entry ledger(const gf_pool *pool, uint32_t w, const char *resource) {
  gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
  if (gf_pool_ledger_lookup(&e, pool, w, resource) != GF_OK) {
    e.capacity = -1.0;
    e.in_use = 0.0;
    e.peak_in_use = 0.0;
  }
  return e;
}

// Sum of in_use over every ledger line of every worker.
inline double total_in_use(const gf_pool *pool) {
  double sum = 0.0;
  const uint32_t n = worker_count(pool);
  for (uint32_t w = 0; w < n; ++w) {
    uint32_t size = 0;
    if (gf_pool_ledger_size(&size, pool, w) != GF_OK) continue;
    for (uint32_t i = 0; i < size; ++i) {
      gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
      if (gf_pool_ledger_entry(&e, pool, w, i) == GF_OK) sum += e.in_use;
    }
  }
  return sum;
}

// Expects every ledger line of every worker to come back to in_use == 0 (bounded wait) and to
// have kept 0 <= in_use, peak_in_use <= capacity.
inline void expect_ledger_idle(const gf_pool *pool) {
  EXPECT_TRUE(wait_until([&] { return total_in_use(pool) == 0.0; }, 10000ms))
      << "ledger in_use did not return to 0; total = " << total_in_use(pool);
  const uint32_t n = worker_count(pool);
  for (uint32_t w = 0; w < n; ++w) {
    uint32_t size = 0;
    GF_EXPECT_OK(gf_pool_ledger_size(&size, pool, w));
    for (uint32_t i = 0; i < size; ++i) {
      gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
      GF_EXPECT_OK(gf_pool_ledger_entry(&e, pool, w, i));
      const std::string res = e.resource ? e.resource : "<null>";
      EXPECT_EQ(e.in_use, 0.0) << "worker " << w << " resource " << res;
      EXPECT_LE(e.peak_in_use, e.capacity) << "worker " << w << " resource " << res;
      EXPECT_GE(e.peak_in_use, 0.0) << "worker " << w << " resource " << res;
    }
  }
}

inline gf_run_stats run_stats(gf_run *run) {
  gf_run_stats st = GF_RUN_STATS_INIT;
  const gf_status s = gf_run_stats_get(&st, run);
  EXPECT_EQ(s, GF_OK) << describe(s);
  return st;
}

inline gf_task_state task_state(gf_run *run, gf_task t) {
  gf_task_state st = GF_TASK_STATE_FORCE32;
  const gf_status s = gf_run_task_state(&st, run, t);
  EXPECT_EQ(s, GF_OK) << describe(s);
  return st;
}

inline gf_run_state run_state(gf_run *run) {
  gf_run_state st = GF_RUN_STATE_FORCE32;
  const gf_status s = gf_run_state_get(&st, run);
  EXPECT_EQ(s, GF_OK) << describe(s);
  return st;
}

inline std::string task_error(gf_run *run, gf_task t) {
  const char *m = nullptr;
  const gf_status s = gf_run_task_error(&m, run, t);
  EXPECT_EQ(s, GF_OK) << describe(s);
  return m ? std::string(m) : std::string("<null>");
}

// Fetches a whole buffer into a vector (empty vector and a test failure on error).
inline std::vector<unsigned char> fetch(gf_run *run, gf_data d) {
  uint64_t size = 0;
  gf_status s = gf_run_fetch(&size, run, d, nullptr, 0);
  EXPECT_EQ(s, GF_OK) << "gf_run_fetch(size) -> " << describe(s);
  if (s != GF_OK) return {};
  std::vector<unsigned char> bytes(static_cast<size_t>(size));
  uint64_t size2 = 0;
  s = gf_run_fetch(&size2, run, d, bytes.data(), size);
  EXPECT_EQ(s, GF_OK) << "gf_run_fetch -> " << describe(s);
  EXPECT_EQ(size2, size);
  return bytes;
}

// Writes a deterministic pattern (seeded) into an output and returns whether that worked.
inline unsigned char pattern_byte(uint64_t seed, uint64_t i) {
  return static_cast<unsigned char>((i * 131u + seed * 7u + (i >> 9)) & 0xFFu);
}

inline bool write_pattern(gf_task_ctx *ctx, uint32_t index, uint64_t size, uint64_t seed) {
  void *p = nullptr;
  const gf_status s = gf_task_ctx_output(&p, ctx, index, size);
  EXPECT_EQ(s, GF_OK) << "gf_task_ctx_output -> " << describe(s);
  if (s != GF_OK || p == nullptr) return false;
  auto *bytes = static_cast<unsigned char *>(p);
  for (uint64_t i = 0; i < size; ++i) bytes[i] = pattern_byte(seed, i);
  return true;
}

inline bool check_pattern(const unsigned char *bytes, uint64_t size, uint64_t seed) {
  for (uint64_t i = 0; i < size; ++i)
    if (bytes[i] != pattern_byte(seed, i)) return false;
  return true;
}

// Rendezvous of `n` parties with a timeout: returns true when all n arrived in time.
class Rendezvous {
 public:
  explicit Rendezvous(int n) : n_(n) {}
  bool arrive_and_wait(std::chrono::milliseconds timeout = 10000ms) {
    count_.fetch_add(1);
    return wait_until([&] { return count_.load() >= n_; }, timeout);
  }
  int arrived() const { return count_.load(); }

 private:
  int n_;
  std::atomic<int> count_{0};
};

}  // namespace gft
