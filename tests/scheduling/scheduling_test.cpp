// scheduling_test.cpp: where and in which order tasks run — data locality, priorities, data
// movement between memory spaces, freeing of intermediate data, and idle workers taking work.
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bitset>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "test_support.hpp"

using namespace gft;

namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kStride = 64 * 1024;

// Fast fill for big buffers: a constant with a seeded byte every kStride bytes.
bool fill_sparse(gf_task_ctx *ctx, uint32_t index, uint64_t size, uint64_t seed) {
  void *p = nullptr;
  const gf_status s = gf_task_ctx_output(&p, ctx, index, size);
  EXPECT_EQ(s, GF_OK) << describe(s);
  if (s != GF_OK || p == nullptr) return false;
  auto *b = static_cast<unsigned char *>(p);
  std::memset(b, 0x5C, static_cast<size_t>(size));
  for (uint64_t i = 0; i < size; i += kStride) b[i] = pattern_byte(seed, i / kStride);
  b[size - 1] = static_cast<unsigned char>(seed);
  return true;
}

bool check_sparse(const void *p, uint64_t size, uint64_t seed) {
  const auto *b = static_cast<const unsigned char *>(p);
  for (uint64_t i = 0; i < size; i += kStride)
    if (b[i] != pattern_byte(seed, i / kStride)) return false;
  if (b[size / 2 + 1] != 0x5C) return false;
  return b[size - 1] == static_cast<unsigned char>(seed);
}

bool input_ok(gf_task_ctx *ctx, uint32_t index, uint64_t size, uint64_t seed) {
  const void *p = nullptr;
  uint64_t got = 0;
  const gf_status s = gf_task_ctx_input(&p, &got, ctx, index);
  EXPECT_EQ(s, GF_OK) << describe(s);
  EXPECT_EQ(got, size);
  return s == GF_OK && got == size && p != nullptr && check_sparse(p, size, seed);
}

uint32_t task_worker(gf_run *run, gf_task t) {
  uint32_t w = 9999;
  const gf_status s = gf_run_task_worker(&w, run, t);
  EXPECT_EQ(s, GF_OK) << describe(s);
  return w;
}

TEST(Scheduling, ConsumerRunsWhereItsLargeInputIs) {
  // Copies are slow (16 MiB take 0.8 s), so running next to the data is always best.
  constexpr uint64_t size = 16 * MiB;
  Pool pool = make_pool(host_config(1, 2, 128 * MiB, 2e7, 2));
  Graph g = make_graph();
  gf_data big = must_add_buffer(g.get(), "big", size);
  TaskSpec p;
  p.name = "producer";
  p.outputs = {big};
  p.gpu = [](gf_task_ctx *ctx) { return fill_sparse(ctx, 0, size, 7) ? 0 : 1; };
  gf_task tp = must_add_task(g.get(), p);

  auto ok = std::make_shared<std::atomic<int>>(0);
  TaskSpec c1;
  c1.name = "gpu_consumer";
  c1.inputs = {big};
  c1.gpu = [ok](gf_task_ctx *ctx) {
    if (input_ok(ctx, 0, size, 7)) ok->fetch_add(1);
    return 0;
  };
  gf_task t1 = must_add_task(g.get(), c1);
  TaskSpec c2;
  c2.name = "either_consumer";
  c2.inputs = {big};
  c2.gpu = c1.gpu;
  c2.cpu = c1.gpu;
  gf_task t2 = must_add_task(g.get(), c2);

  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(ok->load(), 2);
  const uint32_t wp = task_worker(run.get(), tp);
  EXPECT_EQ(worker_info(pool.get(), wp).kind, GF_WORKER_GPU);
  EXPECT_EQ(task_worker(run.get(), t1), wp) << "GPU consumer did not run next to its input";
  EXPECT_EQ(task_worker(run.get(), t2), wp) << "consumer with both bodies moved 16 MiB instead";
  const gf_run_stats st = run_stats(run.get());
  EXPECT_LT(st.bytes_transferred, size) << "the large buffer was copied";
}

// Runs `priorities` as independent tasks on a single CPU worker, all behind one gate task, and
// returns the order in which they ran (indices into priorities).
std::vector<int> run_order(const std::vector<int32_t> &priorities) {
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  auto mu = std::make_shared<std::mutex>();
  auto order = std::make_shared<std::vector<int>>();
  TaskSpec gate;
  gate.name = "gate";
  gate.cpu = [](gf_task_ctx *) { return 0; };
  gate.priority = -1000;
  gf_task tg = must_add_task(g.get(), gate);
  for (size_t i = 0; i < priorities.size(); ++i) {
    TaskSpec s;
    s.name = "p" + std::to_string(i);
    s.priority = priorities[i];
    s.after = {tg};
    const int idx = static_cast<int>(i);
    s.cpu = [mu, order, idx](gf_task_ctx *) {
      std::lock_guard<std::mutex> lock(*mu);
      order->push_back(idx);
      return 0;
    };
    must_add_task(g.get(), s);
  }
  RunPtr run(submit(pool.get(), g.get()));
  if (!run) return {};
  const gf_status s = gf_run_wait(run.get(), kWaitMs);
  EXPECT_EQ(s, GF_OK) << describe(s);
  return *order;
}

TEST(Scheduling, HigherPriorityRunsFirstThenGraphOrder) {
  std::mt19937 rng(77);
  std::vector<int32_t> prio(30);
  for (auto &p : prio) p = std::uniform_int_distribution<int32_t>(-3, 3)(rng);
  std::vector<int> expected(prio.size());
  std::iota(expected.begin(), expected.end(), 0);
  std::stable_sort(expected.begin(), expected.end(), [&](int a, int b) {
    return prio[static_cast<size_t>(a)] > prio[static_cast<size_t>(b)];
  });
  const std::vector<int> got = run_order(prio);
  EXPECT_EQ(got, expected);
}

TEST(Scheduling, PriorityThenOlderRunFirstAcrossRuns) {
  Pool pool = make_pool(host_config(1, -1));
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto started = std::make_shared<std::atomic<bool>>(false);
  Graph blocker = make_graph();
  TaskSpec b;
  b.name = "blocker";
  b.cpu = [release, started](gf_task_ctx *) {
    started->store(true);
    wait_until([&] { return release->load(); });
    return 0;
  };
  must_add_task(blocker.get(), b);
  RunPtr r0(submit(pool.get(), blocker.get()));
  ASSERT_NE(r0, nullptr);
  ASSERT_TRUE(wait_until([&] { return started->load(); }));

  auto mu = std::make_shared<std::mutex>();
  auto order = std::make_shared<std::vector<std::string>>();
  auto make = [&](const std::string &prefix, int32_t priority) {
    Graph g = make_graph();
    for (int i = 0; i < 3; ++i) {
      TaskSpec s;
      s.name = prefix + std::to_string(i);
      s.priority = priority;
      const std::string name = s.name;
      s.cpu = [mu, order, name](gf_task_ctx *) {
        std::lock_guard<std::mutex> lock(*mu);
        order->push_back(name);
        return 0;
      };
      must_add_task(g.get(), s);
    }
    return g;
  };
  Graph ga = make("old", 0), gb = make("new", 0), gc = make("urgent", 5);
  RunPtr ra(submit(pool.get(), ga.get()));
  RunPtr rb(submit(pool.get(), gb.get()));
  RunPtr rc(submit(pool.get(), gc.get()));
  ASSERT_TRUE(ra && rb && rc);
  release->store(true);
  for (gf_run *r : {r0.get(), ra.get(), rb.get(), rc.get()}) GF_EXPECT_OK(gf_run_wait(r, kWaitMs));
  const std::vector<std::string> expected = {"urgent0", "urgent1", "urgent2", "old0", "old1",
                                             "old2",    "new0",    "new1",    "new2"};
  EXPECT_EQ(*order, expected);
}

TEST(Scheduling, DataMovesBetweenHostAndDevice) {
  constexpr uint64_t size = 1 * MiB;
  Pool pool = make_pool(host_config(1, 1, 64 * MiB));
  Graph g = make_graph();
  std::vector<unsigned char> host(64 * 1024);
  for (size_t i = 0; i < host.size(); ++i) host[i] = pattern_byte(11, i);
  gf_data in{0};
  GF_ASSERT_OK(gf_graph_add_host_buffer(&in, g.get(), "host_in", host.data(), host.size(), 0));
  gf_data on_device = must_add_buffer(g.get(), "on_device", size);
  gf_data copied = must_add_buffer(g.get(), "copied", host.size(), GF_DATA_KEEP);
  gf_data verdict = must_add_buffer(g.get(), "verdict", 1);

  TaskSpec p;  // host -> device: reads the host input on the GPU, writes two outputs there
  p.name = "on_gpu";
  p.inputs = {in};
  p.outputs = {on_device, copied};
  const uint64_t host_size = host.size();
  p.gpu = [host_size](gf_task_ctx *ctx) {
    EXPECT_EQ(task_env(ctx).kind, GF_WORKER_GPU);
    const void *src = nullptr;
    uint64_t got = 0;
    if (gf_task_ctx_input(&src, &got, ctx, 0) != GF_OK || got != host_size) return 1;
    if (!check_pattern(static_cast<const unsigned char *>(src), got, 11)) {
      gf_task_ctx_fail(ctx, "host input arrived corrupted");
      return 1;
    }
    void *dst = nullptr;
    if (gf_task_ctx_output(&dst, ctx, 1, host_size) != GF_OK) return 1;
    std::memcpy(dst, src, static_cast<size_t>(host_size));
    return fill_sparse(ctx, 0, size, 3) ? 0 : 1;
  };
  must_add_task(g.get(), p);

  TaskSpec c;  // device -> host: a CPU body reads what the GPU body wrote
  c.name = "on_cpu";
  c.inputs = {on_device};
  c.outputs = {verdict};
  c.cpu = [](gf_task_ctx *ctx) {
    EXPECT_EQ(task_env(ctx).kind, GF_WORKER_CPU);
    void *out = nullptr;
    if (gf_task_ctx_output(&out, ctx, 0, 1) != GF_OK) return 1;
    *static_cast<unsigned char *>(out) = input_ok(ctx, 0, size, 3) ? 1 : 0;
    return 0;
  };
  must_add_task(g.get(), c);

  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  const std::vector<unsigned char> v = fetch(run.get(), verdict);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], 1) << "the CPU consumer read different bytes than the GPU producer wrote";
  const std::vector<unsigned char> back = fetch(run.get(), copied);  // device -> host by fetch
  EXPECT_EQ(back, host);
  const gf_run_stats st = run_stats(run.get());
  EXPECT_GE(st.transfers, 2u);
  EXPECT_GE(st.bytes_transferred, size + host.size());
}

TEST(Scheduling, DataMovesBetweenDevices) {
  constexpr uint64_t size = 2 * MiB;
  Pool pool = make_pool(host_config(1, 2, 64 * MiB, 1e10, 1));
  Graph g = make_graph();
  auto meet = std::make_shared<Rendezvous>(2);
  auto met = std::make_shared<std::atomic<int>>(0);
  gf_data d[2];
  gf_task producer[2];
  for (int i = 0; i < 2; ++i) {
    d[i] = must_add_buffer(g.get(), nullptr, size);
    TaskSpec p;
    p.name = "producer" + std::to_string(i);
    p.resources = {{"GPU", 1.0}};  // two whole-device tasks at once: one per device
    p.outputs = {d[i]};
    const uint64_t seed = static_cast<uint64_t>(20 + i);
    p.gpu = [meet, met, seed](gf_task_ctx *ctx) {
      if (meet->arrive_and_wait()) met->fetch_add(1);
      return fill_sparse(ctx, 0, size, seed) ? 0 : 1;
    };
    producer[i] = must_add_task(g.get(), p);
  }
  auto ok = std::make_shared<std::atomic<int>>(0);
  TaskSpec c;
  c.name = "joins_both";
  c.inputs = {d[0], d[1]};
  c.gpu = [ok](gf_task_ctx *ctx) {
    if (input_ok(ctx, 0, size, 20) && input_ok(ctx, 1, size, 21)) ok->store(1);
    return 0;
  };
  gf_task tc = must_add_task(g.get(), c);

  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(met->load(), 2) << "the two producers did not run at the same time";
  const uint32_t w0 = task_worker(run.get(), producer[0]);
  const uint32_t w1 = task_worker(run.get(), producer[1]);
  EXPECT_NE(w0, w1) << "both GPU=1 producers ran on one device";
  EXPECT_EQ(worker_info(pool.get(), task_worker(run.get(), tc)).kind, GF_WORKER_GPU);
  EXPECT_EQ(ok->load(), 1) << "the consumer read different bytes than the producers wrote";
  const gf_run_stats st = run_stats(run.get());
  EXPECT_GE(st.transfers, 1u);
  EXPECT_GE(st.bytes_transferred, size);
}

TEST(Scheduling, IntermediateDataIsFreedAsSoonAsConsumed) {
  // Six 16 MiB intermediates on a 40 MiB device: only possible if each is freed once consumed.
  constexpr uint64_t size = 16 * MiB;
  constexpr int kChain = 6;
  Pool pool = make_pool(host_config(1, 1, 40 * MiB));
  uint32_t gpu_worker = 0;
  for (uint32_t w = 0; w < worker_count(pool.get()); ++w)
    if (worker_info(pool.get(), w).kind == GF_WORKER_GPU) gpu_worker = w;
  ASSERT_EQ(worker_info(pool.get(), gpu_worker).kind, GF_WORKER_GPU);

  Graph g = make_graph();
  std::vector<gf_data> d(kChain);
  auto ok = std::make_shared<std::atomic<int>>(0);
  for (int i = 0; i < kChain; ++i) {
    d[static_cast<size_t>(i)] = must_add_buffer(g.get(), nullptr, size);
    TaskSpec s;
    s.name = "step" + std::to_string(i);
    if (i > 0) s.inputs = {d[static_cast<size_t>(i - 1)]};
    s.outputs = {d[static_cast<size_t>(i)]};
    const uint64_t seed = static_cast<uint64_t>(i);
    s.gpu = [ok, seed](gf_task_ctx *ctx) {
      if (seed == 0 || input_ok(ctx, 0, size, seed - 1)) ok->fetch_add(1);
      return fill_sparse(ctx, 0, size, seed) ? 0 : 1;
    };
    must_add_task(g.get(), s);
  }
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(ok->load(), kChain);

  // Only the last output (consumed by no task, hence kept) stays on the device.
  EXPECT_TRUE(wait_until(
      [&] {
        return ledger(pool.get(), gpu_worker, "gpu_memory").in_use == static_cast<double>(size);
      },
      5000ms))
      << "gpu_memory in_use = " << ledger(pool.get(), gpu_worker, "gpu_memory").in_use;
  const gf_ledger_entry e = ledger(pool.get(), gpu_worker, "gpu_memory");
  EXPECT_LE(e.peak_in_use, e.capacity);
  EXPECT_GE(e.peak_in_use, static_cast<double>(2 * size))
      << "input and output coexist while a step runs";

  uint64_t got = 0;
  const std::string msg =
      GF_EXPECT_STATUS(GF_ERR_STATE, gf_run_fetch(&got, run.get(), d[2], nullptr, 0));
  EXPECT_FALSE(msg.empty());
  std::vector<unsigned char> last = fetch(run.get(), d[kChain - 1]);
  ASSERT_EQ(last.size(), size);
  EXPECT_TRUE(check_sparse(last.data(), size, kChain - 1));

  run.reset();
  expect_ledger_idle(pool.get());
}

// Counts the distinct workers that ran `tasks` independent tasks; every body waits (bounded) until
// it has seen `want` distinct workers, so a scheduler that leaves a worker idle is caught.
int distinct_workers(const gf_pool_config &c, bool gpu, int tasks, int want) {
  Pool pool = make_pool(c);
  auto seen = std::make_shared<std::atomic<uint32_t>>(0);
  auto gave_up = std::make_shared<std::atomic<bool>>(false);
  Graph g = make_graph();
  for (int i = 0; i < tasks; ++i) {
    TaskSpec s;
    s.name = "t" + std::to_string(i);
    Body body = [seen, gave_up, want](gf_task_ctx *ctx) {
      const uint32_t w = task_env(ctx).worker;
      seen->fetch_or(1u << (w % 32));
      if (!gave_up->load() &&
          !wait_until(
              [&] { return std::bitset<32>(seen->load()).count() >= static_cast<size_t>(want); },
              5000ms))
        gave_up->store(true);
      return 0;
    };
    if (gpu) {
      s.gpu = body;
      s.resources = {{"GPU", 1.0}};
    } else {
      s.cpu = body;
    }
    must_add_task(g.get(), s);
  }
  RunPtr run(submit(pool.get(), g.get()));
  if (!run) return -1;
  const gf_status st = gf_run_wait(run.get(), kWaitMs);
  EXPECT_EQ(st, GF_OK) << describe(st);
  return static_cast<int>(std::bitset<32>(seen->load()).count());
}

TEST(Scheduling, IdleCpuWorkersTakeWork) {
  EXPECT_EQ(distinct_workers(host_config(2, -1), false, 40, 2), 2);
}

// A wide graph's roots are queued in groups, with one wake for each run of them, and idle
// workers steal queued roots in bulk: every one of many CPU workers must still take part (each
// body waits until all of them have run one), so a worker left asleep fails the test.
TEST(Scheduling, EveryIdleCpuWorkerTakesPartOfAWideGraph) {
  EXPECT_EQ(distinct_workers(host_config(8, -1), false, 400, 8), 8);
}

TEST(Scheduling, IdleDevicesTakeWork) {
  EXPECT_EQ(distinct_workers(host_config(1, 2, 64 * MiB, 1e10, 1), true, 20, 2), 2);
}

// A wide graph's roots are placed in groups, and a root that needs only a CPU slot follows the
// one placed before it to its worker without weighing the workers again. A root with only a GPU
// body, sharing the cost key of the CPU root before it, must not follow it: every root runs on
// a worker of the kind its body is for.
TEST(Scheduling, InterleavedRootsOfEachKindRunWhereTheirBodyCan) {
  Pool pool = make_pool(host_config(2, 1));
  constexpr int kRoots = 300;
  Graph g = make_graph();
  std::vector<gf_task> tasks;
  for (int i = 0; i < kRoots; ++i) {
    TaskSpec s;
    const Body body = [](gf_task_ctx *) { return 0; };
    (i % 3 == 2 ? s.gpu : s.cpu) = body;
    s.cost_key = i % 3 == 0 ? "first" : "second";  // a GPU root shares the key of the root before
    tasks.push_back(must_add_task(g.get(), s));
  }
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_TRUE(run);
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  for (int i = 0; i < kRoots; ++i) {
    const uint32_t w = task_worker(run.get(), tasks[i]);
    gf_worker_info info = GF_WORKER_INFO_INIT;
    GF_ASSERT_OK(gf_pool_worker_info(&info, pool.get(), w));
    EXPECT_EQ(info.kind, i % 3 == 2 ? GF_WORKER_GPU : GF_WORKER_CPU) << "root " << i;
  }
}

}  // namespace
