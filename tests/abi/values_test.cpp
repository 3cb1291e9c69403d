// Opaque values as device data (gf_task_ctx_set_device_value): a value a GPU task sets is charged
// to its device while resident there and released when freed; one that cannot fit fails its task
// with an out-of-memory error naming it; values with gf_value_ops are spilled to host under
// pressure and brought back, contents intact, for GPU tasks that read them; values without ops
// are pinned. Emulated devices, so it runs without a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "test_support.hpp"

namespace {
using namespace gft;

constexpr uint64_t KiB = 1ull << 10;
constexpr uint64_t MiB = 1ull << 20;

gf_pool_config one_device(uint64_t capacity) {
  gf_pool_config c = host_config(2, 1, capacity, 4e9, 2);
  c.spill_threshold = 0.8;
  return c;
}

gf_device_memory device_memory(const gf_pool *pool) {
  gf_device_memory m = GF_DEVICE_MEMORY_INIT;
  EXPECT_EQ(gf_pool_device_memory(&m, pool, 0), GF_OK) << last_error();
  return m;
}

uint32_t gpu_worker(const gf_pool *pool) {
  for (uint32_t w = 0; w < worker_count(pool); ++w) {
    if (worker_info(pool, w).kind == GF_WORKER_GPU) return w;
  }
  ADD_FAILURE() << "no GPU worker";
  return 0;
}

// A stand-in for a CuPy array: bytes that say which memory they are in. Every form made and
// destroyed is counted, so the tests can check that each is released exactly once.
struct Blob {
  bool on_device;
  int32_t device;
  std::vector<unsigned char> bytes;
};

std::atomic<int> live_blobs{0};
std::atomic<int> spills{0};
std::atomic<int> unspills{0};
std::atomic<int> destroyed{0};

Blob *make_blob(bool on_device, int32_t device, std::vector<unsigned char> bytes) {
  live_blobs++;
  return new Blob{on_device, device, std::move(bytes)};
}

extern "C" void destroy_blob(void *p) {
  destroyed++;
  live_blobs--;
  delete static_cast<Blob *>(p);
}

extern "C" void *spill_blob(void *p, void *user_data) {
  EXPECT_EQ(user_data, &spills);
  const Blob *b = static_cast<const Blob *>(p);
  EXPECT_TRUE(b->on_device);
  spills++;
  return make_blob(false, -1, b->bytes);
}

extern "C" void *unspill_blob(void *p, int32_t device, void *) {
  const Blob *b = static_cast<const Blob *>(p);
  EXPECT_FALSE(b->on_device);
  unspills++;
  return make_blob(true, device, b->bytes);
}

std::vector<unsigned char> pattern(uint64_t size, uint64_t seed) {
  std::vector<unsigned char> v(size);
  for (uint64_t i = 0; i < size; ++i) v[i] = pattern_byte(seed, i);
  return v;
}

gf_value_ops blob_ops() {
  gf_value_ops ops = GF_VALUE_OPS_INIT;
  ops.spill = spill_blob;
  ops.unspill = unspill_blob;
  ops.user_data = &spills;
  return ops;
}

// A GPU task that sets a device Blob of `size` bytes (pattern `seed`); movable: with blob_ops.
TaskSpec blob_producer(const std::string &name, gf_data out, uint64_t size, uint64_t seed,
                       bool movable, std::shared_ptr<std::atomic<int>> status = nullptr) {
  TaskSpec t;
  t.name = name;
  t.outputs = {out};
  t.gpu = [=](gf_task_ctx *ctx) {
    Blob *b = make_blob(true, task_env(ctx).device, pattern(size, seed));
    gf_value_ops ops = blob_ops();
    gf_status s =
        gf_task_ctx_set_device_value(ctx, 0, b, destroy_blob, size, movable ? &ops : nullptr);
    if (status) status->store(s);
    if (s != GF_OK) {
      std::string message = last_error();  // copied: the next call resets it
      gf_task_ctx_fail(ctx, message.c_str());
      destroy_blob(b);  // ownership stayed here
      return 1;
    }
    return 0;
  };
  return t;
}

gf_data add_value(gf_graph *g, const char *name, uint32_t flags = 0) {
  gf_data d{0};
  EXPECT_EQ(gf_graph_add_value(&d, g, name, 0, flags), GF_OK) << last_error();
  return d;
}

class Values : public ::testing::Test {
 protected:
  void SetUp() override {
    live_blobs = 0;
    spills = 0;
    unspills = 0;
    destroyed = 0;
  }
};

}  // namespace

TEST_F(Values, DeviceValueIsChargedWhileResidentAndReleasedWhenFreed) {
  Pool pool = make_pool(one_device(4 * MiB));
  const uint32_t gpu = gpu_worker(pool.get());
  Graph g = make_graph();
  gf_data kept = add_value(g.get(), "kept", GF_DATA_KEEP);
  gf_data passed = add_value(g.get(), "passed");
  must_add_task(g.get(), blob_producer("make_kept", kept, 1 * MiB, 1, false));
  must_add_task(g.get(), blob_producer("make_passed", passed, 512 * KiB, 2, true));
  gf_data verdict = must_add_buffer(g.get(), "verdict", 8, GF_DATA_KEEP);
  TaskSpec reader;  // a CPU task reads the device form as it is
  reader.name = "read_on_cpu";
  reader.inputs = {passed};
  reader.outputs = {verdict};
  reader.cpu = [](gf_task_ctx *ctx) {
    const void *p = nullptr;
    uint64_t size = 0;
    if (gf_task_ctx_input(&p, &size, ctx, 0) != GF_OK) return 1;
    const Blob *b = static_cast<const Blob *>(p);
    int64_t ok = size == 512 * KiB && b->bytes == pattern(512 * KiB, 2);
    void *out = nullptr;
    if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
    std::memcpy(out, &ok, 8);
    return 0;
  };
  must_add_task(g.get(), reader);
  RunPtr run(submit(pool.get(), g.get()));
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  int64_t ok = 0;
  std::vector<unsigned char> v = fetch(run.get(), verdict);
  std::memcpy(&ok, v.data(), 8);
  EXPECT_EQ(ok, 1);

  // The kept value is resident; the consumed one was released after its reader.
  gf_device_memory m = device_memory(pool.get());
  EXPECT_EQ(m.resident, 1 * MiB);
  EXPECT_EQ(m.spilled, 0u);
  gf_ledger_entry e = ledger(pool.get(), gpu, "gpu_memory");
  EXPECT_EQ(e.in_use, static_cast<double>(1 * MiB));
  EXPECT_GE(e.peak_in_use, static_cast<double>(1 * MiB));
  // The consumed value's form is destroyed by its reader's thread, maybe after the run finished.
  EXPECT_TRUE(wait_until([] { return live_blobs.load() == 1; }, 10000ms)) << live_blobs.load();
  void *value = nullptr;
  GF_ASSERT_OK(gf_run_value(&value, run.get(), kept));
  EXPECT_EQ(static_cast<Blob *>(value)->bytes, pattern(1 * MiB, 1));

  run.reset();
  EXPECT_EQ(device_memory(pool.get()).resident, 0u);
  EXPECT_TRUE(wait_until([] { return live_blobs.load() == 0; }, 10000ms))
      << "every form destroyed exactly once: " << live_blobs.load();
  EXPECT_EQ(destroyed.load(), 2);
  expect_ledger_idle(pool.get());
}

TEST_F(Values, OnACpuWorkerADeviceValueIsAPlainValue) {
  Pool pool = make_pool(one_device(1 * MiB));
  Graph g = make_graph();
  gf_data out = add_value(g.get(), "big", GF_DATA_KEEP);
  TaskSpec t;
  t.name = "cpu_maker";
  t.outputs = {out};
  t.cpu = [](gf_task_ctx *ctx) {
    gf_value_ops ops = blob_ops();
    Blob *b = make_blob(false, -1, {});
    // 32 MiB on a pool whose only device has 1 MiB: nothing to charge on a CPU worker.
    return gf_task_ctx_set_device_value(ctx, 0, b, destroy_blob, 32 * MiB, &ops) == GF_OK ? 0 : 1;
  };
  must_add_task(g.get(), t);
  RunPtr run(submit(pool.get(), g.get()));
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(device_memory(pool.get()).resident, 0u);
  run.reset();
  EXPECT_TRUE(wait_until([] { return live_blobs.load() == 0; }, 10000ms)) << live_blobs.load();
  expect_ledger_idle(pool.get());
}

TEST_F(Values, AValueThatCannotFitFailsItsTaskWithOutOfMemory) {
  Pool pool = make_pool(one_device(1 * MiB));
  Graph g = make_graph();
  gf_data out = add_value(g.get(), "chunk", GF_DATA_KEEP);
  auto status = std::make_shared<std::atomic<int>>(GF_OK);
  TaskSpec t = blob_producer("make_32MB_chunk", out, 32000000, 7, true, status);
  auto produce = t.gpu;
  t.gpu = [produce](gf_task_ctx *ctx) {
    // One of spill/unspill without the other is refused first.
    gf_value_ops half = GF_VALUE_OPS_INIT;
    half.spill = spill_blob;
    Blob dummy{true, 0, {}};
    if (gf_task_ctx_set_device_value(ctx, 0, &dummy, nullptr, 8, &half) !=
        GF_ERR_INVALID_ARGUMENT) {
      gf_task_ctx_fail(ctx, "half a gf_value_ops was accepted");
      return 1;
    }
    return produce(ctx);
  };
  gf_task task = must_add_task(g.get(), t);
  RunPtr run(submit(pool.get(), g.get()));
  GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(status->load(), GF_ERR_OUT_OF_MEMORY);
  std::string e = task_error(run.get(), task);
  EXPECT_NE(e.find("out of memory"), std::string::npos) << e;
  EXPECT_NE(e.find("make_32MB_chunk"), std::string::npos) << e;
  EXPECT_NE(e.find("32000000"), std::string::npos) << e;
  EXPECT_EQ(device_memory(pool.get()).resident, 0u);
  run.reset();
  EXPECT_TRUE(wait_until([] { return live_blobs.load() == 0; }, 10000ms)) << live_blobs.load();
  expect_ledger_idle(pool.get());
}

TEST_F(Values, PinnedValuesAreNeverSpilled) {
  // Three pinned 400 KiB values kept on a 1 MiB device: two fit, the third cannot be made room
  // for (nothing may move) and fails.
  Pool pool = make_pool(one_device(1 * MiB));
  Graph g = make_graph();
  std::vector<gf_task> tasks;
  for (int i = 0; i < 3; ++i) {
    std::string name = "pinned" + std::to_string(i);
    gf_data d = add_value(g.get(), name.c_str(), GF_DATA_KEEP);
    tasks.push_back(must_add_task(
        g.get(), blob_producer("make_" + name, d, 400 * KiB, static_cast<uint64_t>(i), false)));
  }
  RunPtr run(submit(pool.get(), g.get()));
  GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run.get(), kWaitMs));
  int failed = 0;
  for (gf_task t : tasks) {
    if (task_state(run.get(), t) != GF_TASK_FAILED) continue;
    failed++;
    EXPECT_NE(task_error(run.get(), t).find("out of memory"), std::string::npos);
  }
  EXPECT_EQ(failed, 1);
  gf_device_memory m = device_memory(pool.get());
  EXPECT_EQ(m.resident, 800 * KiB);
  EXPECT_EQ(m.spilled_total, 0u);
  EXPECT_EQ(spills.load(), 0);
  run.reset();
  EXPECT_TRUE(wait_until([] { return live_blobs.load() == 0; }, 10000ms)) << live_blobs.load();
  expect_ledger_idle(pool.get());
}

TEST_F(Values, MovableValuesSpillUnderPressureAndComeBackIntact) {
  // Four 300 KiB blobs made on a 1 MiB device (spill threshold 80 %): older ones go to host.
  // A CPU task reads all four in whichever form they are; then a GPU task per blob reads it
  // back on the device, with its contents, through unspill.
  constexpr int kBlobs = 4;
  constexpr uint64_t kSize = 300 * KiB;
  Pool pool = make_pool(one_device(1 * MiB));
  const uint32_t gpu = gpu_worker(pool.get());
  Graph g = make_graph();
  std::vector<gf_data> blobs;
  for (int i = 0; i < kBlobs; ++i) {
    std::string name = "blob" + std::to_string(i);
    blobs.push_back(add_value(g.get(), name.c_str()));
    must_add_task(g.get(), blob_producer("make_" + name, blobs.back(), kSize,
                                         static_cast<uint64_t>(i), true));
  }
  gf_data all_there = must_add_buffer(g.get(), "all_there", 8);
  TaskSpec barrier;
  barrier.name = "read_all_on_cpu";
  barrier.inputs = blobs;
  barrier.outputs = {all_there};
  barrier.cpu = [](gf_task_ctx *ctx) {
    int64_t ok = 1;
    for (uint32_t i = 0; i < kBlobs; ++i) {
      const void *p = nullptr;
      uint64_t size = 0;
      if (gf_task_ctx_input(&p, &size, ctx, i) != GF_OK) return 1;
      if (static_cast<const Blob *>(p)->bytes != pattern(kSize, i)) ok = 0;
    }
    void *out = nullptr;
    if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
    std::memcpy(out, &ok, 8);
    return 0;
  };
  must_add_task(g.get(), barrier);
  std::vector<gf_data> verdicts;
  for (int i = 0; i < kBlobs; ++i) {
    std::string name = "check" + std::to_string(i);
    verdicts.push_back(must_add_buffer(g.get(), name.c_str(), 16, GF_DATA_KEEP));
    TaskSpec t;
    t.name = name;
    t.inputs = {blobs[static_cast<size_t>(i)], all_there};
    t.outputs = {verdicts.back()};
    t.gpu = [i](gf_task_ctx *ctx) {
      const void *p = nullptr;
      uint64_t size = 0;
      if (gf_task_ctx_input(&p, &size, ctx, 0) != GF_OK) return 1;
      const Blob *b = static_cast<const Blob *>(p);
      int64_t verdict[2] = {b->on_device && b->device == task_env(ctx).device && size == kSize &&
                                b->bytes == pattern(kSize, static_cast<uint64_t>(i)),
                            0};
      const void *q = nullptr;
      if (gf_task_ctx_input(&q, &size, ctx, 1) != GF_OK) return 1;
      std::memcpy(&verdict[1], q, 8);
      void *out = nullptr;
      if (gf_task_ctx_output(&out, ctx, 0, 16) != GF_OK) return 1;
      std::memcpy(out, verdict, 16);
      return 0;
    };
    must_add_task(g.get(), t);
  }
  RunPtr run(submit(pool.get(), g.get()));
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  for (int i = 0; i < kBlobs; ++i) {
    std::vector<unsigned char> v = fetch(run.get(), verdicts[static_cast<size_t>(i)]);
    int64_t verdict[2] = {0, 0};
    std::memcpy(verdict, v.data(), 16);
    EXPECT_EQ(verdict[0], 1) << "blob " << i << " came back wrong";
    EXPECT_EQ(verdict[1], 1) << "the CPU task read a blob wrong";
  }
  EXPECT_GT(spills.load(), 0);
  EXPECT_GT(unspills.load(), 0);
  gf_device_memory m = device_memory(pool.get());
  EXPECT_GE(m.spilled_total, kSize);
  EXPECT_GE(m.unspilled_total, kSize);
  EXPECT_LE(ledger(pool.get(), gpu, "gpu_memory").peak_in_use, static_cast<double>(1 * MiB));
  EXPECT_GE(ledger(pool.get(), gpu, "gpu_memory").peak_in_use, static_cast<double>(3 * kSize));
  run.reset();
  // A spill started by the last task may still be under way: it releases its forms when done.
  EXPECT_TRUE(wait_until([] { return live_blobs.load() == 0; }, 10000ms))
      << live_blobs.load() << " forms never destroyed";
  EXPECT_EQ(destroyed.load(), kBlobs + spills.load() + unspills.load()) << "destroyed twice";
  EXPECT_EQ(device_memory(pool.get()).spilled, 0u);
  expect_ledger_idle(pool.get());
}
