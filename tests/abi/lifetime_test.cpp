// Lifetimes across threads: reading results while the device spills them, destroying runs while
// the spiller works, callbacks of destroyed runs, a pool destroyed from its own task body, and
// bodies that wait for other runs of their own pool. Each case was once a crash, a hang or a
// corrupted read (see the reliability issue); all run on emulated devices.
#include <gtest/gtest.h>

#include <cstring>

#include "test_support.hpp"

namespace {
using namespace gft;

constexpr uint64_t MiB = 1ull << 20;

gf_pool_config small_device(uint64_t capacity, double spill_threshold, int32_t cpu_workers = 1) {
  gf_pool_config c = host_config(cpu_workers, 1, capacity, 4e9, 2);
  c.spill_threshold = spill_threshold;
  return c;
}

// A GPU task writing `size` bytes of pattern `seed` into `out`.
TaskSpec producer(const std::string &name, gf_data out, uint64_t size, uint64_t seed) {
  TaskSpec t;
  t.name = name;
  t.outputs = {out};
  t.gpu = [size, seed](gf_task_ctx *ctx) { return write_pattern(ctx, 0, size, seed) ? 0 : 1; };
  return t;
}

}  // namespace

TEST(Lifetime, FetchWhileTheDeviceSpillsReturnsTheProducersBytes) {
  // A chain of tasks on one device thread produces kept 4 MiB results; past a low threshold each
  // is copied to host and dropped from the device while the next is made. A reader fetches each
  // result over and over from the moment it exists, so reads overlap those spills.
  constexpr int kBlocks = 24;
  constexpr uint64_t kSize = 4 * MiB;
  gf_pool_config config = host_config(1, 1, 16 * MiB, 1e9, 1);
  config.spill_threshold = 0.2;
  Pool pool = make_pool(config);
  Graph g = make_graph();
  std::vector<gf_data> kept;
  std::vector<gf_task> made;
  for (int i = 0; i < kBlocks; ++i) {
    kept.push_back(
        must_add_buffer(g.get(), ("kept" + std::to_string(i)).c_str(), kSize, GF_DATA_KEEP));
    TaskSpec p = producer("make" + std::to_string(i), kept.back(), kSize, 1000u + i);
    if (!made.empty()) p.after = {made.back()};
    made.push_back(must_add_task(g.get(), p));
  }
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  std::vector<unsigned char> bytes(kSize);
  int reads = 0;
  for (int i = 0; i < kBlocks; ++i) {
    ASSERT_TRUE(wait_until([&] { return task_state(run.get(), made[i]) == GF_TASK_SUCCEEDED; }));
    for (int k = 0; k < 6; ++k) {
      uint64_t size = 0;
      GF_ASSERT_OK(gf_run_fetch(&size, run.get(), kept[i], bytes.data(), bytes.size()));
      ASSERT_EQ(size, kSize);
      ASSERT_TRUE(check_pattern(bytes.data(), size, 1000u + i))
          << "kept" << i << " came back altered on read " << k;
      ++reads;
    }
  }
  GF_EXPECT_OK(gf_run_wait(run.get(), kWaitMs));
  gf_device_memory m = GF_DEVICE_MEMORY_INIT;
  GF_EXPECT_OK(gf_pool_device_memory(&m, pool.get(), 0));
  EXPECT_GE(m.spilled_total, (kBlocks - 4) * kSize) << "the results must have been spilled";
  run.reset();
  expect_ledger_idle(pool.get());
}

TEST(Lifetime, DestroyingFinishedRunsWhileTheirDeviceSpills) {
  // Two threads submit small graphs with kept 4 MiB results, wait and destroy the run; two others
  // push producer/consumer graphs through the same 48 MiB device, which spills all the while.
  Pool pool = make_pool(small_device(48 * MiB, 0.25));
  // Bounded by rounds and by time, so sanitized builds (several times slower) stay short.
  const auto deadline = std::chrono::steady_clock::now() + 8s;
  auto stop = [&] { return std::chrono::steady_clock::now() > deadline; };
  std::atomic<int> failures{0};
  auto keepers = [&](int id) {
    for (int round = 0; round < 150 && !stop(); ++round) {
      Graph g = make_graph();
      for (int i = 0; i < 3; ++i) {
        std::string n = std::to_string(i);
        gf_data out = must_add_buffer(g.get(), ("out" + n).c_str(), 2 * MiB, GF_DATA_KEEP);
        must_add_task(g.get(), producer("keep" + n, out, 2 * MiB, static_cast<uint64_t>(id)));
      }
      gf_run *run = nullptr;
      if (gf_graph_submit(&run, pool.get(), g.get(), nullptr) != GF_OK) {
        failures++;
        continue;
      }
      if (gf_run_wait(run, kWaitMs) != GF_OK) failures++;
      gf_run_destroy(run);
    }
  };
  auto streamers = [&](int id) {
    for (int round = 0; round < 12 && !stop(); ++round) {
      Graph g = make_graph();
      for (int i = 0; i < 6; ++i) {
        std::string n = std::to_string(i);
        gf_data block = must_add_buffer(g.get(), ("b" + n).c_str(), 8 * MiB);
        gf_task made = must_add_task(g.get(), producer("p" + n, block, 8 * MiB, id * 100u + i));
        TaskSpec c;
        c.name = "c" + n;
        c.inputs = {block};
        c.after = {made};
        c.gpu = [](gf_task_ctx *) { return 0; };
        must_add_task(g.get(), c);
      }
      RunPtr run(submit(pool.get(), g.get()));
      if (!run || gf_run_wait(run.get(), kWaitMs) != GF_OK) failures++;
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(keepers, 1);
  threads.emplace_back(keepers, 2);
  threads.emplace_back(streamers, 3);
  threads.emplace_back(streamers, 4);
  for (auto &t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  expect_ledger_idle(pool.get());
  gf_device_memory m = GF_DEVICE_MEMORY_INIT;
  GF_EXPECT_OK(gf_pool_device_memory(&m, pool.get(), 0));
  EXPECT_EQ(m.resident, 0u);
  EXPECT_EQ(m.spilled, 0u);
}

namespace {

struct CallbackProbe {
  std::atomic<int> calls{0};
  std::atomic<gf_status> state_status{GF_OK};
  std::atomic<gf_run_state> seen{GF_RUN_RUNNING};
};

extern "C" void probe_callback(gf_run *run, gf_run_state, void *user_data) {
  auto *probe = static_cast<CallbackProbe *>(user_data);
  gf_run_state state = GF_RUN_RUNNING;
  probe->state_status = gf_run_state_get(&state, run);
  probe->seen = state;
  probe->calls++;
}

extern "C" void destroying_callback(gf_run *run, gf_run_state, void *user_data) {
  gf_run_destroy(run);
  static_cast<CallbackProbe *>(user_data)->calls++;
}

}  // namespace

TEST(Lifetime, CallbackAfterDestroyCanUseItsRun) {
  // The owner destroys the run while a body still runs; the callback fires later, on the worker,
  // and reads its run's state through the handle it is given.
  Pool pool = make_pool(host_config(1, 0));
  Graph g = make_graph();
  std::atomic<bool> started{false}, release{false};
  TaskSpec slow;
  slow.name = "slow";
  slow.cpu = [&](gf_task_ctx *) {
    started = true;
    wait_until([&] { return release.load(); });
    return 0;
  };
  must_add_task(g.get(), slow);
  CallbackProbe probe;
  gf_submit_options options = GF_SUBMIT_OPTIONS_INIT;
  options.on_complete = probe_callback;
  options.user_data = &probe;
  gf_run *run = submit(pool.get(), g.get(), &options);
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(wait_until([&] { return started.load(); }));
  gf_run_destroy(run);
  release = true;
  ASSERT_TRUE(wait_until([&] { return probe.calls.load() == 1; }));
  EXPECT_EQ(probe.state_status.load(), GF_OK) << "the callback's run handle was already invalid";
  EXPECT_EQ(probe.seen.load(), GF_RUN_CANCELLED);
  ASSERT_TRUE(wait_until([&] {
    gf_run_state s;
    return gf_run_state_get(&s, run) == GF_ERR_INVALID_HANDLE;
  })) << "the handle must go once the callback has returned";
  expect_ledger_idle(pool.get());
}

TEST(Lifetime, CallbackMayDestroyItsOwnRun) {
  Pool pool = make_pool(host_config(2, 0));
  CallbackProbe probe;
  gf_submit_options options = GF_SUBMIT_OPTIONS_INIT;
  options.on_complete = destroying_callback;
  options.user_data = &probe;
  for (int i = 0; i < 50; ++i) {
    Graph g = make_graph();
    TaskSpec t;
    t.name = "t";
    t.cpu = [](gf_task_ctx *) { return 0; };
    must_add_task(g.get(), t);
    submit(pool.get(), g.get(), &options);  // owned by its callback from here on
  }
  EXPECT_TRUE(wait_until([&] { return probe.calls.load() == 50; }));
  expect_ledger_idle(pool.get());
}

TEST(Lifetime, BodyThatDestroysItsOwnPool) {
  // The caller keeps no pool handle of its own: a body destroys the pool it runs on. The pool
  // shuts down (the other run is cancelled) without the worker joining itself.
  gf_pool_config config = host_config(2, 0);
  gf_pool *pool = nullptr;
  GF_ASSERT_OK(gf_pool_create(&pool, &config));
  Graph g = make_graph();
  std::atomic<bool> started{false}, run_gone{false}, destroyed{false};
  TaskSpec t;
  t.name = "destroy_pool";
  t.cpu = [&, pool](gf_task_ctx *) {
    started = true;
    wait_until([&] { return run_gone.load(); });
    gf_pool_destroy(pool);
    destroyed = true;
    return 0;
  };
  must_add_task(g.get(), t);
  Graph other = make_graph();
  TaskSpec waiter;
  waiter.name = "waits_for_cancel";
  waiter.cpu = [](gf_task_ctx *ctx) {
    wait_until([&] { return gf_task_ctx_cancelled(ctx) != 0; });
    return 0;
  };
  must_add_task(other.get(), waiter);
  gf_run *long_run = submit(pool, other.get());
  gf_run *run = submit(pool, g.get());
  ASSERT_NE(run, nullptr);
  ASSERT_NE(long_run, nullptr);
  ASSERT_TRUE(wait_until([&] { return started.load(); }));
  gf_run_destroy(run);  // the body's own run is gone before the body tears the pool down
  run_gone = true;
  ASSERT_TRUE(wait_until([&] { return destroyed.load(); }));
  GF_EXPECT_STATUS(GF_ERR_CANCELLED, gf_run_wait(long_run, kWaitMs));
  uint32_t n = 0;
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_pool_worker_count(&n, pool));
  gf_run_destroy(long_run);
}

TEST(Lifetime, PoolWhoseLastReferenceGoesOnItsOwnWorker) {
  // The body destroys its pool after the caller destroyed the body's run and the graph: the run
  // finishing on the worker drops the last reference to the pool there. The teardown must move
  // to another thread (a thread cannot join itself) and complete: the body's captured state is
  // destroyed with the graph's contents.
  gf_pool_config config = host_config(2, 0);
  gf_pool *pool = nullptr;
  GF_ASSERT_OK(gf_pool_create(&pool, &config));
  auto started = std::make_shared<std::atomic<bool>>(false);
  auto run_gone = std::make_shared<std::atomic<bool>>(false);
  auto released = std::make_shared<std::atomic<bool>>(false);
  struct SignalOnDestroy {
    std::shared_ptr<std::atomic<bool>> flag;
    ~SignalOnDestroy() { flag->store(true); }
  };
  Graph g = make_graph();
  {
    auto signal = std::make_shared<SignalOnDestroy>();
    signal->flag = released;
    TaskSpec t;
    t.name = "destroy_pool";
    t.cpu = [started, run_gone, signal, pool](gf_task_ctx *) {
      started->store(true);
      wait_until([&] { return run_gone->load(); });
      gf_pool_destroy(pool);
      return 0;
    };
    must_add_task(g.get(), t);
  }
  ASSERT_FALSE(released->load());
  gf_run *run = submit(pool, g.get());
  ASSERT_NE(run, nullptr);
  g.reset();
  ASSERT_TRUE(wait_until([&] { return started->load(); }));
  gf_run_destroy(run);
  run_gone->store(true);
  EXPECT_TRUE(wait_until([&] { return released->load(); }))
      << "the pool's last reference went on its worker and the teardown never completed";
}

namespace {

// A body that submits a one-task graph to `pool` and waits for it with no time limit.
Body nested_submitter(gf_pool *pool, std::atomic<int> *inner_ran) {
  return [pool, inner_ran](gf_task_ctx *) {
    gf_graph *g = nullptr;
    if (gf_graph_create(&g) != GF_OK) return 1;
    TaskSpec inner;
    inner.name = "inner";
    inner.cpu = [inner_ran](gf_task_ctx *) {
      inner_ran->fetch_add(1);
      return 0;
    };
    gf_task t;
    if (add_task(&t, g, inner) != GF_OK) return 1;
    gf_run *run = nullptr;
    gf_status s = gf_graph_submit(&run, pool, g, nullptr);
    if (s == GF_OK) s = gf_run_wait(run, -1);
    gf_run_destroy(run);
    gf_graph_destroy(g);
    return s == GF_OK ? 0 : 1;
  };
}

}  // namespace

TEST(Lifetime, NestedWaitsOnEveryWorkerStillFinish) {
  // Every CPU thread runs a body that submits to its own pool and waits without a time limit,
  // as Dask users do with compute() inside a task: the waiting threads step aside.
  Pool pool = make_pool(host_config(2, 0));
  Graph g = make_graph();
  std::atomic<int> inner_ran{0};
  for (int i = 0; i < 6; ++i) {
    TaskSpec outer;
    outer.name = "outer" + std::to_string(i);
    outer.cpu = nested_submitter(pool.get(), &inner_ran);
    must_add_task(g.get(), outer);
  }
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_EXPECT_OK(gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(inner_ran.load(), 6);
  run.reset();
  expect_ledger_idle(pool.get());
  // Spare threads retire: the pool keeps working with its own threads afterwards.
  Graph again = make_graph();
  std::atomic<int> ran{0};
  for (int i = 0; i < 20; ++i) {
    TaskSpec t;
    t.name = "after" + std::to_string(i);
    t.cpu = [&ran](gf_task_ctx *) {
      ran++;
      return 0;
    };
    must_add_task(again.get(), t);
  }
  RunPtr second(submit(pool.get(), again.get()));
  GF_EXPECT_OK(gf_run_wait(second.get(), kWaitMs));
  EXPECT_EQ(ran.load(), 20);
}

TEST(Lifetime, BodyWaitingForItsOwnRunFailsAtOnceSayingWhy) {
  Pool pool = make_pool(host_config(1, 0));
  Graph g = make_graph();
  std::atomic<gf_run *> self{nullptr};
  std::atomic<gf_status> waited{GF_OK};
  std::string message;
  TaskSpec t;
  t.name = "waits_for_itself";
  t.cpu = [&](gf_task_ctx *) {
    wait_until([&] { return self.load() != nullptr; });
    waited = gf_run_wait(self.load(), -1);
    message = last_error();
    return 0;
  };
  must_add_task(g.get(), t);
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  self = run.get();
  GF_EXPECT_OK(gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(waited.load(), GF_ERR_STATE);
  EXPECT_NE(message.find("its own run"), std::string::npos) << message;
}
