// Devices and spilling through the public ABI: device descriptions, memory accounting, data moved
// off a full device and brought back, and the out-of-memory error when spilling is off. All on
// the host backend's emulated devices, so it runs without a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include "test_support.hpp"

namespace {
using namespace gft;

constexpr uint64_t MiB = 1ull << 20;

gf_device_memory device_memory(const gf_pool *pool, uint32_t device) {
  gf_device_memory m = GF_DEVICE_MEMORY_INIT;
  GF_EXPECT_OK(gf_pool_device_memory(&m, pool, device));
  return m;
}

// One emulated device of `capacity` bytes, one thread on it, one CPU worker.
gf_pool_config one_device(uint64_t capacity, double spill_threshold) {
  gf_pool_config c = host_config(1, 1, capacity, 1e10, 1);
  c.spill_threshold = spill_threshold;
  return c;
}

// `n` producers each write a `size` pattern on the device (high priority, so they all run before
// any consumer); `n` consumers each check one and write an 8-byte verdict (1 = bytes intact).
struct FanGraph {
  Graph graph = make_graph();
  std::vector<gf_task> consumers;
  std::vector<gf_data> verdicts;
};

FanGraph producers_then_consumers(int n, uint64_t size) {
  FanGraph f;
  for (int i = 0; i < n; ++i) {
    gf_data block = must_add_buffer(f.graph.get(), ("block" + std::to_string(i)).c_str(), size);
    gf_data verdict = must_add_buffer(f.graph.get(), ("verdict" + std::to_string(i)).c_str(), 8);
    TaskSpec produce;
    produce.name = "produce" + std::to_string(i);
    produce.priority = 10;
    produce.outputs = {block};
    produce.gpu = [size, i](gf_task_ctx *ctx) {
      return write_pattern(ctx, 0, size, static_cast<uint64_t>(i)) ? 0 : 1;
    };
    must_add_task(f.graph.get(), produce);
    TaskSpec consume;
    consume.name = "consume" + std::to_string(i);
    consume.inputs = {block};
    consume.outputs = {verdict};
    consume.gpu = [size, i](gf_task_ctx *ctx) {
      const void *p = nullptr;
      uint64_t n_bytes = 0;
      if (gf_task_ctx_input(&p, &n_bytes, ctx, 0) != GF_OK) return 1;
      void *out = nullptr;
      if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
      int64_t ok = n_bytes == size && check_pattern(static_cast<const unsigned char *>(p), size,
                                                    static_cast<uint64_t>(i));
      std::memcpy(out, &ok, 8);
      return 0;
    };
    f.consumers.push_back(must_add_task(f.graph.get(), consume));
    f.verdicts.push_back(verdict);
  }
  return f;
}

// Three GPU tasks, make0..2, each writing a kept 16 MiB block (pattern 100 + i).
std::vector<gf_data> three_kept_blocks(gf_graph *g) {
  std::vector<gf_data> kept;
  for (int i = 0; i < 3; ++i) {
    gf_data d = must_add_buffer(g, ("kept" + std::to_string(i)).c_str(), 16 * MiB, GF_DATA_KEEP);
    TaskSpec s;
    s.name = "make" + std::to_string(i);
    s.outputs = {d};
    s.gpu = [i](gf_task_ctx *ctx) {
      return write_pattern(ctx, 0, 16 * MiB, 100 + static_cast<uint64_t>(i)) ? 0 : 1;
    };
    must_add_task(g, s);
    kept.push_back(d);
  }
  return kept;
}

}  // namespace

TEST(Devices, EmulatedDevicesDescribeThemselves) {
  gf_pool_config c = host_config(1, 3, 48 * MiB);
  c.device_memory_limit = 32 * MiB;
  Pool pool = make_pool(c);
  uint32_t n = 0;
  GF_ASSERT_OK(gf_pool_device_count(&n, pool.get()));
  ASSERT_EQ(n, 3u);
  for (uint32_t d = 0; d < n; ++d) {
    gf_device_info info = GF_DEVICE_INFO_INIT;
    GF_ASSERT_OK(gf_pool_device_info(&info, pool.get(), d));
    EXPECT_EQ(info.ordinal, static_cast<int32_t>(d));
    EXPECT_EQ(info.emulated, 1u);
    EXPECT_EQ(info.total_memory, 48 * MiB);
    EXPECT_EQ(info.pool_memory, 32 * MiB) << "device_memory_limit caps the pool's share";
    ASSERT_NE(info.name, nullptr);
    EXPECT_STRNE(info.name, "");
    int peer = 0;
    GF_EXPECT_OK(gf_pool_peer_access(&peer, pool.get(), d, (d + 1) % n));
    EXPECT_EQ(peer, 1);
  }
  // The GPU worker's gpu_memory ledger line is the pool's share, not the whole device.
  EXPECT_EQ(ledger(pool.get(), 1, "gpu_memory").capacity, static_cast<double>(32 * MiB));
  gf_device_info info = GF_DEVICE_INFO_INIT;
  std::string m =
      GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_device_info(&info, pool.get(), 3));
  EXPECT_NE(m.find("out of range"), std::string::npos) << m;
  info.struct_size = 4;
  GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_pool_device_info(&info, pool.get(), 0));
}

TEST(Devices, CudaBackendWithoutAGpuIsAClearError) {
  gf_pool_config c = GF_POOL_CONFIG_INIT;
  c.backend = GF_BACKEND_CUDA;
  gf_pool *p = nullptr;
  gf_status s = gf_pool_create(&p, &c);
  if (s == GF_OK) {  // a machine with a usable GPU: the pool must describe a real device
    gf_device_info info = GF_DEVICE_INFO_INIT;
    GF_EXPECT_OK(gf_pool_device_info(&info, p, 0));
    EXPECT_EQ(info.emulated, 0u);
    gf_pool_destroy(p);
    GTEST_SKIP() << "a GPU is present; the no-GPU error path cannot be exercised here";
  }
  EXPECT_EQ(s, GF_ERR_NOT_FOUND) << describe(s);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(gf_last_error()).find("CUDA"), std::string::npos) << gf_last_error();
}

TEST(Devices, SpillingLetsMoreDataThanTheDeviceHoldsFlowThrough) {
  // 8 blocks of 16 MiB pass through a 64 MiB device: half of them must leave and come back.
  Pool pool = make_pool(one_device(64 * MiB, 0.8));
  FanGraph f = producers_then_consumers(8, 16 * MiB);
  RunPtr run(submit(pool.get(), f.graph.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), 60000));
  for (gf_data v : f.verdicts) {
    std::vector<unsigned char> bytes = fetch(run.get(), v);
    ASSERT_EQ(bytes.size(), 8u);
    int64_t ok = 0;
    std::memcpy(&ok, bytes.data(), 8);
    EXPECT_EQ(ok, 1) << "a block came back from host memory altered";
  }
  gf_device_memory m = device_memory(pool.get(), 0);
  EXPECT_GE(m.spilled_total, 4 * 16 * MiB);
  EXPECT_GE(m.unspilled_total, 16 * MiB);
  // No ping-pong: each block leaves at most about twice (seen: 208 MiB; thrashing: 500-2000).
  EXPECT_LE(m.spilled_total, 2 * 8 * 16 * MiB);
  const gf_ledger_entry e = ledger(pool.get(), 1, "gpu_memory");
  EXPECT_LE(e.peak_in_use, e.capacity);
  run.reset();
  expect_ledger_idle(pool.get());
  m = device_memory(pool.get(), 0);
  EXPECT_EQ(m.spilled, 0u) << "spilled data is released with its run";
  EXPECT_EQ(m.resident, 0u);
}

TEST(Devices, WithoutSpillingTheSameWorkloadFailsWithOutOfMemory) {
  Pool pool = make_pool(one_device(64 * MiB, 1.0));  // 1.0: never spill
  FanGraph f = producers_then_consumers(8, 16 * MiB);
  RunPtr run(submit(pool.get(), f.graph.get()));
  ASSERT_NE(run, nullptr);
  std::string m = GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run.get(), 60000));
  EXPECT_NE(m.find("out of memory"), std::string::npos) << m;
  EXPECT_NE(m.find("gpu:0"), std::string::npos) << m;
  run.reset();
  expect_ledger_idle(pool.get());
}

TEST(Devices, ThresholdSpillsKeptResultsThatStayReadable) {
  // Kept results fill a 64 MiB device to 75 %; above a 0.5 threshold the oldest move to host.
  Pool pool = make_pool(one_device(64 * MiB, 0.5));
  Graph g = make_graph();
  std::vector<gf_data> kept = three_kept_blocks(g.get());
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), 60000));
  for (int i = 0; i < 3; ++i) {
    std::vector<unsigned char> bytes = fetch(run.get(), kept[static_cast<size_t>(i)]);
    ASSERT_EQ(bytes.size(), 16 * MiB);
    EXPECT_TRUE(check_pattern(bytes.data(), bytes.size(), 100 + static_cast<uint64_t>(i)));
  }
  EXPECT_TRUE(
      wait_until([&] { return device_memory(pool.get(), 0).resident <= 32 * MiB; }, 10000ms))
      << "resident " << device_memory(pool.get(), 0).resident;
  EXPECT_GE(device_memory(pool.get(), 0).spilled, 16 * MiB);
  run.reset();
  expect_ledger_idle(pool.get());
}

// Tells when one data's spill to host memory has finished, from the pool's events.
struct SpillWatch {
  uint64_t data = 0;
  std::atomic<bool> finished{false};
  static void on_event(const gf_event *e, void *self) {
    auto *watch = static_cast<SpillWatch *>(self);
    if (e->kind == GF_EVENT_SPILL_FINISHED && e->data.id == watch->data) watch->finished = true;
  }
};

TEST(Devices, ThresholdIsEnforcedWhenTasksEndNotOnlyWhenTheyArePlaced) {
  // kept0, kept1 and kept2 (12, 8 and 12 MiB) fill the device to its 32 MiB threshold exactly.
  // Placing `reader` (kept0 and kept2 in, 16 MiB out) lifts it over: the check made there starts
  // kept1's spill, the only data no task holds. `reader` waits, while it runs, until that spill
  // has finished: the device is still over (40 MiB), and every check made at placement is past.
  // When reader ends, the device must shed data then, since no later task will come to do it.
  SpillWatch watch;  // declared before the pool, which may call it until it is gone
  Pool pool = make_pool(one_device(64 * MiB, 0.5));
  Graph g = make_graph();
  const uint64_t sizes[] = {12 * MiB, 8 * MiB, 12 * MiB};
  std::vector<gf_data> kept;
  std::vector<gf_task> makes;
  for (int i = 0; i < 3; ++i) {
    const uint64_t size = sizes[i];
    gf_data d = must_add_buffer(g.get(), ("kept" + std::to_string(i)).c_str(), size, GF_DATA_KEEP);
    TaskSpec s;
    s.name = "make" + std::to_string(i);
    s.outputs = {d};
    s.gpu = [i, size](gf_task_ctx *ctx) {
      return write_pattern(ctx, 0, size, 100 + static_cast<uint64_t>(i)) ? 0 : 1;
    };
    makes.push_back(must_add_task(g.get(), s));
    kept.push_back(d);
  }
  watch.data = kept[1].id;
  GF_ASSERT_OK(gf_pool_set_event_callback(pool.get(), SpillWatch::on_event, &watch));
  std::atomic<bool> spill_seen{false};
  std::atomic<uint64_t> resident_after_spill{0};
  TaskSpec reader;
  reader.name = "reader";
  reader.inputs = {kept[0], kept[2]};
  reader.after = {makes[1]};  // placed once all three are on the device
  reader.outputs = {must_add_buffer(g.get(), "result", 16 * MiB)};
  reader.gpu = [&](gf_task_ctx *ctx) {
    // A generous bound, against a hang: the spill takes a millisecond.
    spill_seen = wait_until([&] { return watch.finished.load(); }, 20000ms);
    resident_after_spill = device_memory(pool.get(), 0).resident;
    return spill_seen && write_pattern(ctx, 0, 16 * MiB, 7) ? 0 : 1;
  };
  must_add_task(g.get(), reader);
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), 60000));
  EXPECT_TRUE(spill_seen.load()) << "kept1's spill did not finish while reader ran";
  EXPECT_EQ(resident_after_spill.load(), 40 * MiB)
      << "the device was not left over its threshold by the checks at placement";
  EXPECT_TRUE(wait_until([&] { return device_memory(pool.get(), 0).resident <= 32 * MiB; }, 5000ms))
      << "resident " << device_memory(pool.get(), 0).resident;
  for (int i = 0; i < 3; ++i) {
    std::vector<unsigned char> bytes = fetch(run.get(), kept[static_cast<size_t>(i)]);
    ASSERT_EQ(bytes.size(), sizes[i]);
    EXPECT_TRUE(check_pattern(bytes.data(), bytes.size(), 100 + static_cast<uint64_t>(i)));
  }
  run.reset();
  expect_ledger_idle(pool.get());
  GF_EXPECT_OK(gf_pool_set_event_callback(pool.get(), nullptr, nullptr));
}
