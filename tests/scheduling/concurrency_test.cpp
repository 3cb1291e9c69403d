// concurrency_test.cpp: many submitters on one pool, several pools in one process, and tearing
// things down while work is in flight (the sanitizer builds check for races and leaks).
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

using namespace gft;

namespace {

uint64_t read_u64(gf_task_ctx *ctx, uint32_t index) {
  const void *p = nullptr;
  uint64_t n = 0;
  uint64_t v = 0;
  if (gf_task_ctx_input(&p, &n, ctx, index) == GF_OK && n == sizeof v) std::memcpy(&v, p, sizeof v);
  return v;
}

bool write_u64(gf_task_ctx *ctx, uint32_t index, uint64_t v) {
  void *o = nullptr;
  if (gf_task_ctx_output(&o, ctx, index, sizeof v) != GF_OK) return false;
  std::memcpy(o, &v, sizeof v);
  return true;
}

// A diamond: seed -> (x+1 on a GPU, x*2 on a CPU) -> sum (either kind). Result: 3*seed + 1.
struct Diamond {
  Graph graph;
  gf_data result{0};
};

Diamond diamond(uint64_t seed, const std::string &prefix) {
  Diamond d;
  d.graph = make_graph();
  gf_graph *g = d.graph.get();
  gf_data s = must_add_buffer(g, nullptr, 8), l = must_add_buffer(g, nullptr, 8),
          r = must_add_buffer(g, nullptr, 8);
  d.result = must_add_buffer(g, "result", 8, GF_DATA_KEEP);
  TaskSpec t0;
  t0.name = prefix + "seed";
  t0.outputs = {s};
  t0.cpu = [seed](gf_task_ctx *ctx) { return write_u64(ctx, 0, seed) ? 0 : 1; };
  must_add_task(g, t0);
  TaskSpec t1;
  t1.name = prefix + "plus_one";
  t1.inputs = {s};
  t1.outputs = {l};
  t1.gpu = [](gf_task_ctx *ctx) { return write_u64(ctx, 0, read_u64(ctx, 0) + 1) ? 0 : 1; };
  t1.resources = {{"GPU", 0.25}};
  must_add_task(g, t1);
  TaskSpec t2;
  t2.name = prefix + "twice";
  t2.inputs = {s};
  t2.outputs = {r};
  t2.cpu = [](gf_task_ctx *ctx) { return write_u64(ctx, 0, read_u64(ctx, 0) * 2) ? 0 : 1; };
  must_add_task(g, t2);
  TaskSpec t3;
  t3.name = prefix + "sum";
  t3.inputs = {l, r};
  t3.outputs = {d.result};
  t3.cpu = t3.gpu = [](gf_task_ctx *ctx) {
    return write_u64(ctx, 0, read_u64(ctx, 0) + read_u64(ctx, 1)) ? 0 : 1;
  };
  must_add_task(g, t3);
  return d;
}

uint64_t fetch_u64(gf_run *run, gf_data d) {
  uint64_t v = 0, size = 0;
  const gf_status s = gf_run_fetch(&size, run, d, &v, sizeof v);
  EXPECT_EQ(s, GF_OK) << describe(s);
  EXPECT_EQ(size, sizeof v);
  return v;
}

TEST(Concurrency, ManyThreadsSubmitToOnePool) {
  Pool pool = make_pool(host_config(2, 2));
  constexpr int kThreads = 8;
  constexpr int kRounds = 5;
  std::atomic<int> correct{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread reuses one graph and also builds fresh ones.
      Diamond reused = diamond(static_cast<uint64_t>(t) * 1000, "r" + std::to_string(t) + "_");
      for (int i = 0; i < kRounds; ++i) {
        const uint64_t seed = static_cast<uint64_t>(t * 1000 + i + 1);
        Diamond fresh = diamond(seed, "f_");
        gf_run *r1 = nullptr, *r2 = nullptr;
        const gf_status s1 = gf_graph_submit(&r1, pool.get(), fresh.graph.get(), nullptr);
        const gf_status s2 = gf_graph_submit(&r2, pool.get(), reused.graph.get(), nullptr);
        EXPECT_EQ(s1, GF_OK);
        EXPECT_EQ(s2, GF_OK);
        RunPtr run1(r1), run2(r2);
        if (!run1 || !run2) continue;
        EXPECT_EQ(gf_run_wait(run1.get(), kWaitMs), GF_OK);
        EXPECT_EQ(gf_run_wait(run2.get(), kWaitMs), GF_OK);
        if (fetch_u64(run1.get(), fresh.result) == 3 * seed + 1 &&
            fetch_u64(run2.get(), reused.result) == 3 * static_cast<uint64_t>(t) * 1000 + 1)
          correct.fetch_add(1);
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(correct.load(), kThreads * kRounds);
  expect_ledger_idle(pool.get());
}

// The first submit freezes a graph: several threads submitting the same fresh graph at once
// freeze it once, and every run computes the same result.
TEST(Concurrency, ThreadsSubmittingOneFreshGraphAtOnceFreezeItOnce) {
  Pool pool = make_pool(host_config(2, 0));
  constexpr int kThreads = 4;
  constexpr int kRounds = 20;
  std::atomic<int> correct{0};
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t seed = static_cast<uint64_t>(round) + 7;
    Diamond shared = diamond(seed, "s_");
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        ready.fetch_add(1);
        while (ready.load() < kThreads) {
        }  // all submit together
        gf_run *r = nullptr;
        EXPECT_EQ(gf_graph_submit(&r, pool.get(), shared.graph.get(), nullptr), GF_OK)
            << last_error();
        RunPtr run(r);
        if (!run) return;
        EXPECT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK);
        if (fetch_u64(run.get(), shared.result) == 3 * seed + 1) correct.fetch_add(1);
      });
    }
    for (auto &th : threads) th.join();
  }
  EXPECT_EQ(correct.load(), kThreads * kRounds);
  expect_ledger_idle(pool.get());
}

TEST(Concurrency, ManyThreadsWaitAndQueryOneRun) {
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  auto release = std::make_shared<std::atomic<bool>>(false);
  TaskSpec s;
  s.name = "held";
  s.cpu = [release](gf_task_ctx *) {
    wait_until([&] { return release->load(); });
    return 0;
  };
  gf_task t = must_add_task(g.get(), s);
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  std::atomic<int> ok{0}, in_flight{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      if (i % 2 == 0) {
        in_flight.fetch_add(1);  // just before: the task cannot end until all six are in
        if (gf_run_wait(run.get(), kWaitMs) == GF_OK) ok.fetch_add(1);
      } else {
        gf_status p = GF_TIMEOUT;
        for (bool first = true; p == GF_TIMEOUT; first = false) {
          gf_run_state rs{};
          gf_task_state ts{};
          gf_run_stats st = GF_RUN_STATS_INIT;
          EXPECT_EQ(gf_run_state_get(&rs, run.get()), GF_OK);
          EXPECT_EQ(gf_run_task_state(&ts, run.get(), t), GF_OK);
          EXPECT_EQ(gf_run_stats_get(&st, run.get()), GF_OK);
          p = gf_run_poll(run.get());
          EXPECT_TRUE(!first || p == GF_TIMEOUT) << "the run ended before it was released";
          if (first) in_flight.fetch_add(1);
          std::this_thread::yield();
        }
        if (p == GF_OK) ok.fetch_add(1);
      }
    });
  }
  // Released only once every poller has seen the run still going and every waiter is about to
  // wait: the queries and the waits overlap the run's end.
  EXPECT_TRUE(wait_until([&] { return in_flight.load() == 6; }));
  release->store(true);
  for (auto &th : threads) th.join();
  EXPECT_EQ(ok.load(), 6);
}

TEST(Concurrency, PoolsAreIndependent) {
  Pool a = make_pool(host_config(1, -1));
  Pool b = make_pool(host_config(2, 1));
  EXPECT_EQ(worker_count(a.get()), 1u);
  EXPECT_EQ(worker_count(b.get()), 3u);

  // Pool a's only worker is held; pool b still runs work to completion.
  Graph held = make_graph();
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto started = std::make_shared<std::atomic<bool>>(false);
  TaskSpec s;
  s.name = "held";
  s.cpu = [release, started](gf_task_ctx *) {
    started->store(true);
    wait_until([&] { return release->load(); });
    return 0;
  };
  s.resources = {{"cpu", 1.0}};
  must_add_task(held.get(), s);
  RunPtr ra(submit(a.get(), held.get()));
  ASSERT_NE(ra, nullptr);
  ASSERT_TRUE(wait_until([&] { return started->load(); }));

  Diamond d = diamond(7, "");
  RunPtr rb(submit(b.get(), d.graph.get()));
  ASSERT_NE(rb, nullptr);
  GF_EXPECT_OK(gf_run_wait(rb.get(), kWaitMs));
  EXPECT_EQ(fetch_u64(rb.get(), d.result), 22u);
  GF_EXPECT_STATUS(GF_TIMEOUT, gf_run_poll(ra.get()));
  rb.reset();
  expect_ledger_idle(b.get());
  EXPECT_EQ(ledger(a.get(), 0, "cpu").in_use, 1.0) << "pool a's ledger holds its running task";

  // Destroying pool b leaves pool a's run untouched.
  b.reset();
  GF_EXPECT_STATUS(GF_TIMEOUT, gf_run_poll(ra.get()));
  release->store(true);
  GF_EXPECT_OK(gf_run_wait(ra.get(), kWaitMs));
  ra.reset();
  expect_ledger_idle(a.get());
}

std::atomic<int> g_destroyed{0};
void count_destroy(void *p) {
  g_destroyed.fetch_add(1);
  delete static_cast<int *>(p);
}

struct CallbackLog {
  std::atomic<int> calls{0};
  std::atomic<int> state{0};
};
void on_complete(gf_run *, gf_run_state state, void *user) {
  auto *log = static_cast<CallbackLog *>(user);
  log->state.store(static_cast<int>(state));
  log->calls.fetch_add(1);
}

TEST(Concurrency, PoolDestroyedWithWorkInFlight) {
  g_destroyed = 0;
  Pool pool = make_pool(host_config(1, 1));
  ASSERT_NE(pool, nullptr);
  Graph g = make_graph();
  auto started = std::make_shared<std::atomic<bool>>(false);
  auto later_ran = std::make_shared<std::atomic<int>>(0);
  gf_data v{0}, on_device{0};
  GF_ASSERT_OK(gf_graph_add_value(&v, g.get(), "value", 8, GF_DATA_KEEP));
  on_device = must_add_buffer(g.get(), "on_device", 1 << 20, GF_DATA_KEEP);
  TaskSpec first;
  first.name = "first";
  first.outputs = {v, on_device};
  first.gpu = [](gf_task_ctx *ctx) {
    void *o = nullptr;
    if (gf_task_ctx_output(&o, ctx, 1, 0) != GF_OK) return 1;
    std::memset(o, 1, 1 << 20);
    return gf_task_ctx_set_value(ctx, 0, new int(3), count_destroy, 8) == GF_OK ? 0 : 1;
  };
  gf_task tf = must_add_task(g.get(), first);
  TaskSpec lng;
  lng.name = "long";
  lng.after = {tf};
  lng.cpu = [started](gf_task_ctx *ctx) {
    started->store(true);
    // Runs until the pool shuts down (bounded, so a broken library fails instead of hanging).
    wait_until([&] { return gf_task_ctx_cancelled(ctx) != 0; });
    return 0;
  };
  gf_task tl = must_add_task(g.get(), lng);
  gf_task prev = tl;
  for (int i = 0; i < 20; ++i) {
    TaskSpec s;
    s.name = "later" + std::to_string(i);
    s.after = {prev};
    s.cpu = counting_body(later_ran);
    prev = must_add_task(g.get(), s);
  }
  CallbackLog log;
  gf_submit_options opts = GF_SUBMIT_OPTIONS_INIT;
  opts.on_complete = on_complete;
  opts.user_data = &log;
  gf_run *raw = nullptr;
  GF_ASSERT_OK(gf_graph_submit(&raw, pool.get(), g.get(), &opts));
  RunPtr run(raw);
  g.reset();
  ASSERT_TRUE(wait_until([&] { return started->load(); }));

  pool.reset();  // must return: the running body observes the shutdown

  EXPECT_EQ(later_ran->load(), 0);
  const gf_status s = gf_run_wait(run.get(), kWaitMs);
  EXPECT_TRUE(s == GF_ERR_CANCELLED || s == GF_ERR_SHUT_DOWN) << describe(s);
  EXPECT_EQ(run_state(run.get()), GF_RUN_CANCELLED);
  EXPECT_TRUE(wait_until([&] { return log.calls.load() >= 1; }, 5000ms));
  EXPECT_EQ(log.calls.load(), 1);
  EXPECT_EQ(log.state.load(), static_cast<int>(GF_RUN_CANCELLED));
  EXPECT_EQ(task_state(run.get(), tf), GF_TASK_SUCCEEDED);
  EXPECT_EQ(g_destroyed.load(), 0) << "the kept value belongs to the live run";
  run.reset();
  EXPECT_EQ(g_destroyed.load(), 1);
  EXPECT_EQ(log.calls.load(), 1);
}

TEST(Concurrency, PoolDestroyedWithQueuedRunsFromSeveralGraphs) {
  Pool pool = make_pool(host_config(1, -1));
  ASSERT_NE(pool, nullptr);
  auto ran = std::make_shared<std::atomic<int>>(0);
  std::vector<Graph> graphs;
  std::vector<RunPtr> runs;
  for (int i = 0; i < 4; ++i) {
    graphs.push_back(make_graph());
    for (int k = 0; k < 10; ++k) {
      TaskSpec s;
      s.name = "t" + std::to_string(k);
      s.cpu = [ran](gf_task_ctx *ctx) {
        ran->fetch_add(1);
        wait_until([&] { return gf_task_ctx_cancelled(ctx) != 0; }, 200ms);
        return 0;
      };
      must_add_task(graphs.back().get(), s);
    }
    runs.emplace_back(submit(pool.get(), graphs.back().get()));
  }
  pool.reset();
  const int ran_at_shutdown = ran->load();
  EXPECT_LT(ran_at_shutdown, 40);
  for (auto &r : runs) {
    ASSERT_NE(r, nullptr);
    const gf_status s = gf_run_wait(r.get(), kWaitMs);
    EXPECT_NE(s, GF_TIMEOUT) << "a run is still running after its pool was destroyed";
    const gf_run_state st = run_state(r.get());
    EXPECT_TRUE(st == GF_RUN_CANCELLED || st == GF_RUN_SUCCEEDED) << st;
  }
  EXPECT_EQ(ran->load(), ran_at_shutdown) << "tasks ran after gf_pool_destroy returned";
}

TEST(Concurrency, DestroyRunWhileRunning) {
  g_destroyed = 0;
  Pool pool = make_pool(host_config(1, 1));
  Graph g = make_graph();
  auto started = std::make_shared<std::atomic<bool>>(false);
  auto later_ran = std::make_shared<std::atomic<int>>(0);
  gf_data v{0};
  GF_ASSERT_OK(gf_graph_add_value(&v, g.get(), "v", 8, 0));
  gf_data buf = must_add_buffer(g.get(), "buf", 4096);
  TaskSpec p;
  p.name = "produce";
  p.outputs = {v, buf};
  p.gpu = [](gf_task_ctx *ctx) {
    void *o = nullptr;
    if (gf_task_ctx_output(&o, ctx, 1, 4096) != GF_OK) return 1;
    return gf_task_ctx_set_value(ctx, 0, new int(1), count_destroy, 8) == GF_OK ? 0 : 1;
  };
  must_add_task(g.get(), p);
  TaskSpec s;
  s.name = "consume_slowly";
  s.inputs = {v, buf};
  s.cpu = [started](gf_task_ctx *ctx) {
    started->store(true);
    wait_until([&] { return gf_task_ctx_cancelled(ctx) != 0; });
    return 0;
  };
  gf_task ts = must_add_task(g.get(), s);
  for (int i = 0; i < 5; ++i) {
    TaskSpec t;
    t.name = "later" + std::to_string(i);
    t.after = {ts};
    t.cpu = counting_body(later_ran);
    must_add_task(g.get(), t);
  }
  gf_run *run = submit(pool.get(), g.get());
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(wait_until([&] { return started->load(); }));
  gf_run_destroy(run);  // cancels; data is freed once the running body is done with it
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_run_poll(run));

  EXPECT_TRUE(wait_until([] { return g_destroyed.load() >= 1; }, 10000ms));
  expect_ledger_idle(pool.get());
  EXPECT_EQ(later_ran->load(), 0);

  // The pool is still fully usable.
  Diamond d = diamond(1, "");
  RunPtr again(submit(pool.get(), d.graph.get()));
  ASSERT_NE(again, nullptr);
  GF_EXPECT_OK(gf_run_wait(again.get(), kWaitMs));
  EXPECT_EQ(fetch_u64(again.get(), d.result), 4u);
  again.reset();
  pool.reset();
  EXPECT_EQ(g_destroyed.load(), 1);
}

TEST(Concurrency, CancelRacesWithCompletion) {
  Pool pool = make_pool(host_config(2, 1));
  for (int i = 0; i < 30; ++i) {
    Diamond d = diamond(static_cast<uint64_t>(i), "");
    CallbackLog log;
    gf_submit_options opts = GF_SUBMIT_OPTIONS_INIT;
    opts.on_complete = on_complete;
    opts.user_data = &log;
    gf_run *raw = nullptr;
    GF_ASSERT_OK(gf_graph_submit(&raw, pool.get(), d.graph.get(), &opts));
    RunPtr run(raw);
    std::thread canceller([&] { gf_run_cancel(run.get()); });
    const gf_status s = gf_run_wait(run.get(), kWaitMs);
    canceller.join();
    EXPECT_TRUE(s == GF_OK || s == GF_ERR_CANCELLED) << describe(s);
    const gf_run_state st = run_state(run.get());
    EXPECT_EQ(st, s == GF_OK ? GF_RUN_SUCCEEDED : GF_RUN_CANCELLED);
    if (s == GF_OK) {
      EXPECT_EQ(fetch_u64(run.get(), d.result), 3u * static_cast<uint64_t>(i) + 1);
    }
    EXPECT_TRUE(wait_until([&] { return log.calls.load() >= 1; }, 5000ms));
    run.reset();
    EXPECT_EQ(log.calls.load(), 1);
    EXPECT_EQ(log.state.load(), static_cast<int>(st));
  }
  expect_ledger_idle(pool.get());
}

}  // namespace
