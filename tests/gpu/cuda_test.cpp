// Tests that need a real GPU: kernels launched from task bodies complete asynchronously, data
// moves between device and host intact, spilling works under real memory pressure, and errors
// from the device fail the task with CUDA's message. Each skips, saying why, without a GPU.
#include <gtest/gtest.h>

#include <cstring>

#include "test_support.hpp"

extern "C" int gft_launch_fill(void *out, size_t n, uint32_t seed, void *stream);
extern "C" int gft_launch_spin(long long cycles, void *stream);
extern "C" int gft_launch_invalid(void *stream);
extern "C" int gft_launch_fault(void *stream);

namespace {
using namespace gft;

constexpr uint64_t MiB = 1ull << 20;

uint32_t expected(uint32_t seed, size_t i) {
  return seed * 2654435761u + static_cast<uint32_t>(i);
}

// A CUDA pool, or a skip naming why there is none.
Pool cuda_pool(uint64_t memory_limit = 0, double spill_threshold = 0) {
  gf_pool_config c = GF_POOL_CONFIG_INIT;
  c.backend = GF_BACKEND_CUDA;
  c.cpu_workers = 2;
  c.device_memory_limit = memory_limit;
  c.spill_threshold = spill_threshold;
  gf_pool *p = nullptr;
  gf_status s = gf_pool_create(&p, &c);
  if (s != GF_OK) return Pool(nullptr);
  return Pool(p);
}

#define REQUIRE_GPU(pool) \
  if (!(pool)) GTEST_SKIP() << "no usable GPU: " << gf_last_error()

// Producer on the GPU fills `n` words with a kernel; a CPU consumer checks them.
Body fill_body(size_t n, uint32_t seed) {
  return [n, seed](gf_task_ctx *ctx) {
    gf_task_env env = task_env(ctx);
    void *out = nullptr;
    if (gf_task_ctx_output(&out, ctx, 0, n * 4) != GF_OK) return 1;
    return gft_launch_fill(out, n, seed, env.stream);
  };
}

Body check_body(size_t n, uint32_t seed, std::shared_ptr<std::atomic<int>> good) {
  return [n, seed, good](gf_task_ctx *ctx) {
    const void *p = nullptr;
    uint64_t size = 0;
    if (gf_task_ctx_input(&p, &size, ctx, 0) != GF_OK || size != n * 4) return 1;
    const auto *words = static_cast<const uint32_t *>(p);
    for (size_t i = 0; i < n; ++i) {
      if (words[i] != expected(seed, i)) return 1;
    }
    good->fetch_add(1);
    return 0;
  };
}

}  // namespace

TEST(Cuda, DevicesAreDescribedInBusOrder) {
  Pool pool = cuda_pool();
  REQUIRE_GPU(pool);
  uint32_t n = 0;
  GF_ASSERT_OK(gf_pool_device_count(&n, pool.get()));
  ASSERT_GE(n, 1u);
  std::string previous;
  for (uint32_t d = 0; d < n; ++d) {
    gf_device_info info = GF_DEVICE_INFO_INIT;
    GF_ASSERT_OK(gf_pool_device_info(&info, pool.get(), d));
    EXPECT_EQ(info.emulated, 0u);
    EXPECT_GE(info.compute_major, 7);
    EXPECT_EQ(std::string(info.uuid).rfind("GPU-", 0), 0u) << info.uuid;
    EXPECT_GT(info.pool_memory, 0u);
    EXPECT_LE(info.pool_memory, info.total_memory);
    EXPECT_LT(previous, std::string(info.pci_bus_id));
    previous = info.pci_bus_id;
  }
}

TEST(Cuda, KernelTasksCompleteAndTheirDataMovesToHost) {
  Pool pool = cuda_pool();
  REQUIRE_GPU(pool);
  auto good = std::make_shared<std::atomic<int>>(0);
  Graph g = make_graph();
  constexpr size_t kWords = 4 << 20;
  for (uint32_t i = 0; i < 8; ++i) {
    gf_data block = must_add_buffer(g.get(), nullptr, kWords * 4);
    TaskSpec produce;
    produce.gpu = fill_body(kWords, i);
    produce.resources = {{"GPU", 0.25}};
    produce.outputs = {block};
    must_add_task(g.get(), produce);
    TaskSpec check;
    check.cpu = check_body(kWords, i, good);
    check.inputs = {block};
    must_add_task(g.get(), check);
  }
  RunPtr run(submit(pool.get(), g.get()));
  GF_ASSERT_OK(gf_run_wait(run.get(), 60000));
  EXPECT_EQ(good->load(), 8);
  EXPECT_GT(run_stats(run.get()).bytes_transferred, 0u);
  run.reset();
  expect_ledger_idle(pool.get());
}

TEST(Cuda, ManyKernelsInFlightOnOneDevice) {
  Pool pool = cuda_pool();
  REQUIRE_GPU(pool);
  Graph g = make_graph();
  for (int i = 0; i < 64; ++i) {
    TaskSpec s;
    s.gpu = [](gf_task_ctx *ctx) { return gft_launch_spin(1000000, task_env(ctx).stream); };
    must_add_task(g.get(), s);
  }
  RunPtr run(submit(pool.get(), g.get()));
  GF_ASSERT_OK(gf_run_wait(run.get(), 60000));
  EXPECT_EQ(run_stats(run.get()).succeeded, 64u);
}

// One GPU task named `name` running `body` on `pool`: the run must fail naming the task. Returns
// the reason the task failed with.
std::string failing_gpu_task(gf_pool *pool, const char *name, Body body) {
  Graph g = make_graph();
  TaskSpec s;
  s.name = name;
  s.gpu = std::move(body);
  gf_task t = must_add_task(g.get(), s);
  RunPtr run(submit(pool, g.get()));
  std::string m = GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run.get(), 60000));
  EXPECT_NE(m.find(name), std::string::npos) << m;
  return task_error(run.get(), t);
}

TEST(Cuda, DeviceFaultFailsTheTaskWithCudasMessage) {
  Pool pool = cuda_pool();
  REQUIRE_GPU(pool);
  const std::string why = failing_gpu_task(pool.get(), "faulting_kernel", [](gf_task_ctx *ctx) {
    return gft_launch_fault(task_env(ctx).stream);
  });
  EXPECT_NE(why.find("cuda"), std::string::npos) << why;
}

TEST(Cuda, ARefusedLaunchTheBodyReturnsFailsTheTask) {
  Pool pool = cuda_pool();
  REQUIRE_GPU(pool);
  failing_gpu_task(pool.get(), "bad_launch",
                   [](gf_task_ctx *ctx) { return gft_launch_invalid(task_env(ctx).stream); });
}

TEST(Cuda, SpillingUnderRealMemoryPressure) {
  Pool pool = cuda_pool(256 * MiB, 0.8);
  REQUIRE_GPU(pool);
  auto good = std::make_shared<std::atomic<int>>(0);
  Graph g = make_graph();
  constexpr size_t kWords = 16 * MiB;  // 64 MiB per block, 8 blocks through a 256 MiB share
  for (uint32_t i = 0; i < 8; ++i) {
    gf_data block = must_add_buffer(g.get(), nullptr, kWords * 4);
    TaskSpec produce;
    produce.priority = 10;
    produce.gpu = fill_body(kWords, i);
    produce.outputs = {block};
    must_add_task(g.get(), produce);
    TaskSpec check;
    check.cpu = check_body(kWords, i, good);
    check.inputs = {block};
    must_add_task(g.get(), check);
  }
  RunPtr run(submit(pool.get(), g.get()));
  GF_ASSERT_OK(gf_run_wait(run.get(), 120000));
  EXPECT_EQ(good->load(), 8);
  gf_device_memory m = GF_DEVICE_MEMORY_INIT;
  GF_ASSERT_OK(gf_pool_device_memory(&m, pool.get(), 0));
  EXPECT_LE(m.resident, m.capacity);
  run.reset();
  expect_ledger_idle(pool.get());
}

TEST(Cuda, TaskThatCannotFitFailsWithOutOfMemory) {
  Pool pool = cuda_pool(64 * MiB, 1.0);
  REQUIRE_GPU(pool);
  Graph g = make_graph();
  gf_data a = must_add_buffer(g.get(), "a", 48 * MiB, GF_DATA_KEEP);
  gf_data b = must_add_buffer(g.get(), "b", 48 * MiB, GF_DATA_KEEP);
  for (gf_data d : {a, b}) {
    TaskSpec s;
    s.gpu = fill_body(12 * MiB, 1);
    s.outputs = {d};
    must_add_task(g.get(), s);
  }
  RunPtr run(submit(pool.get(), g.get()));
  std::string m = GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run.get(), 60000));
  EXPECT_NE(m.find("out of memory"), std::string::npos) << m;
}
