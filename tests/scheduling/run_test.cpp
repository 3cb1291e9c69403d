// run_test.cpp: the life of a run — results, opaque values, host inputs, dynamic sizes, failures,
// retries, cancellation, waiting (timeout, poll, callback, fd) and graph reuse.
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

using namespace gft;

namespace {

bool contains(const std::string &hay, const std::string &needle) {
  return hay.find(needle) != std::string::npos;
}

// Runs g on pool and expects status `want` from gf_run_wait.
RunPtr run_graph(gf_pool *pool, gf_graph *g, gf_status want = GF_OK) {
  RunPtr run(submit(pool, g));
  if (run) {
    const gf_status s = gf_run_wait(run.get(), kWaitMs);
    EXPECT_EQ(s, want) << describe(s);
  }
  return run;
}

TEST(Run, Hello) {
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  gf_data out = must_add_buffer(g.get(), "greeting", 6);
  TaskSpec s;
  s.name = "hello";
  s.outputs = {out};
  s.cpu = [](gf_task_ctx *ctx) {
    void *p = nullptr;
    if (gf_task_ctx_output(&p, ctx, 0, 6) != GF_OK) return 1;
    void *again = nullptr;
    EXPECT_EQ(gf_task_ctx_output(&again, ctx, 0, 0), GF_OK);
    EXPECT_EQ(again, p) << "a second gf_task_ctx_output must return the same buffer";
    std::memcpy(p, "hello", 6);
    const gf_task_env env = task_env(ctx);
    EXPECT_EQ(env.kind, GF_WORKER_CPU);
    EXPECT_EQ(env.device, -1);
    EXPECT_EQ(env.attempt, 1u);
    EXPECT_EQ(env.stream, nullptr);
    EXPECT_STREQ(env.task_name, "hello");
    EXPECT_EQ(gf_task_ctx_cancelled(ctx), 0);
    return 0;
  };
  gf_task t = must_add_task(g.get(), s);
  uint64_t count = 0;
  GF_EXPECT_OK(gf_graph_task_count(&count, g.get()));
  EXPECT_EQ(count, 1u);

  const auto before = std::chrono::steady_clock::now();
  RunPtr run = run_graph(pool.get(), g.get());
  const std::chrono::duration<double> around = std::chrono::steady_clock::now() - before;
  ASSERT_NE(run, nullptr);
  GF_EXPECT_OK(gf_run_poll(run.get()));
  EXPECT_EQ(run_state(run.get()), GF_RUN_SUCCEEDED);
  EXPECT_EQ(task_state(run.get(), t), GF_TASK_SUCCEEDED);
  EXPECT_EQ(task_error(run.get(), t), "");
  uint32_t attempts = 0;
  GF_EXPECT_OK(gf_run_task_attempts(&attempts, run.get(), t));
  EXPECT_EQ(attempts, 1u);
  uint32_t w = 99;
  GF_EXPECT_OK(gf_run_task_worker(&w, run.get(), t));
  EXPECT_EQ(w, 0u);

  uint64_t size = 0;
  GF_EXPECT_OK(gf_run_fetch(&size, run.get(), out, nullptr, 0));
  EXPECT_EQ(size, 6u);
  char buf[16] = {};
  GF_EXPECT_OK(gf_run_fetch(&size, run.get(), out, buf, sizeof buf));
  EXPECT_STREQ(buf, "hello");

  const gf_run_stats st = run_stats(run.get());
  EXPECT_EQ(st.tasks, 1u);
  EXPECT_EQ(st.succeeded, 1u);
  EXPECT_EQ(st.failed, 0u);
  EXPECT_EQ(st.cancelled, 0u);
  EXPECT_EQ(st.attempts, 1u);
  // The run's own clock: it took some time, within the caller's submit-to-return window.
  EXPECT_GT(st.elapsed_s, 0.0);
  EXPECT_LE(st.elapsed_s, around.count());
}

TEST(Run, ChainPassesBuffersAlong) {
  Pool pool = make_pool(host_config(2, 2));
  Graph g = make_graph();
  constexpr int kSteps = 8;
  std::vector<gf_data> d(kSteps);
  for (int i = 0; i < kSteps; ++i) {
    d[static_cast<size_t>(i)] = must_add_buffer(g.get(), nullptr, sizeof(uint64_t));
    TaskSpec s;
    s.name = "add" + std::to_string(i);
    if (i > 0) s.inputs = {d[static_cast<size_t>(i - 1)]};
    s.outputs = {d[static_cast<size_t>(i)]};
    Body body = [i](gf_task_ctx *ctx) {
      uint64_t v = 0;
      if (i > 0) {
        const void *p = nullptr;
        uint64_t n = 0;
        if (gf_task_ctx_input(&p, &n, ctx, 0) != GF_OK || n != sizeof v) return 1;
        std::memcpy(&v, p, sizeof v);
      }
      v = v * 10 + static_cast<uint64_t>(i + 1);
      void *o = nullptr;
      if (gf_task_ctx_output(&o, ctx, 0, sizeof v) != GF_OK) return 1;
      std::memcpy(o, &v, sizeof v);
      return 0;
    };
    // Alternate kinds so that values cross between host and devices.
    if (i % 3 == 0)
      s.cpu = body;
    else if (i % 3 == 1)
      s.gpu = body;
    else
      s.cpu = s.gpu = body;
    must_add_task(g.get(), s);
  }
  RunPtr run = run_graph(pool.get(), g.get());
  ASSERT_NE(run, nullptr);
  std::vector<unsigned char> bytes = fetch(run.get(), d.back());
  ASSERT_EQ(bytes.size(), sizeof(uint64_t));
  uint64_t v = 0;
  std::memcpy(&v, bytes.data(), sizeof v);
  EXPECT_EQ(v, 12345678u);
}

// --- Opaque values ---------------------------------------------------------------------------

struct Tracked {
  std::atomic<int> *destroyed;
  int value;
};
std::atomic<int> g_value_destroyed{0};
std::atomic<int> g_host_value_destroyed{0};
void destroy_tracked(void *p) {
  auto *t = static_cast<Tracked *>(p);
  t->destroyed->fetch_add(1);
  delete t;
}

TEST(Run, OpaqueValuesAreDestroyedExactlyOnce) {
  g_value_destroyed = 0;
  g_host_value_destroyed = 0;
  Pool pool = make_pool(host_config(2, 1));
  Graph g = make_graph();
  gf_data host_v{0};
  auto *hv = new Tracked{&g_host_value_destroyed, 5};
  GF_ASSERT_OK(gf_graph_add_host_value(&host_v, g.get(), "host_value", hv, destroy_tracked, 40));
  gf_data mid{0}, kept{0};
  GF_ASSERT_OK(gf_graph_add_value(&mid, g.get(), "mid", 16, 0));
  GF_ASSERT_OK(gf_graph_add_value(&kept, g.get(), "kept", 16, GF_DATA_KEEP));
  gf_data sink = must_add_buffer(g.get(), "sink", 1);

  TaskSpec a;
  a.name = "make_mid";
  a.inputs = {host_v};
  a.outputs = {mid};
  a.cpu = [](gf_task_ctx *ctx) {
    const void *p = nullptr;
    uint64_t est = 0;
    if (gf_task_ctx_input(&p, &est, ctx, 0) != GF_OK) return 1;
    EXPECT_EQ(est, 40u);
    const int base = static_cast<const Tracked *>(p)->value;
    auto *t = new Tracked{&g_value_destroyed, base * 10};
    if (gf_task_ctx_set_value(ctx, 0, t, destroy_tracked, 123) != GF_OK) {
      delete t;
      return 1;
    }
    return 0;
  };
  must_add_task(g.get(), a);
  TaskSpec b;
  b.name = "use_mid";
  b.inputs = {mid};
  b.outputs = {kept, sink};
  b.cpu = [](gf_task_ctx *ctx) {
    const void *p = nullptr;
    uint64_t est = 0;
    if (gf_task_ctx_input(&p, &est, ctx, 0) != GF_OK) return 1;
    EXPECT_EQ(est, 123u) << "the size estimate given to gf_task_ctx_set_value";
    auto *t = new Tracked{&g_value_destroyed, static_cast<const Tracked *>(p)->value + 1};
    if (gf_task_ctx_set_value(ctx, 0, t, destroy_tracked, 8) != GF_OK) {
      delete t;
      return 1;
    }
    void *o = nullptr;
    return gf_task_ctx_output(&o, ctx, 1, 1) == GF_OK ? 0 : 1;
  };
  must_add_task(g.get(), b);

  RunPtr run = run_graph(pool.get(), g.get());
  ASSERT_NE(run, nullptr);
  // The intermediate value is released once its consumer is done; the kept one is not.
  EXPECT_TRUE(wait_until([] { return g_value_destroyed.load() >= 1; }, 5000ms));
  EXPECT_EQ(g_value_destroyed.load(), 1);
  void *v = nullptr;
  GF_ASSERT_OK(gf_run_value(&v, run.get(), kept));
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(static_cast<Tracked *>(v)->value, 51);
  GF_EXPECT_OK(gf_run_value(&v, run.get(), host_v));
  EXPECT_EQ(v, static_cast<void *>(hv));
  uint64_t size = 0;
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_run_fetch(&size, run.get(), kept, nullptr, 0));
  GF_EXPECT_STATUS(GF_ERR_STATE, gf_run_value(&v, run.get(), mid));

  g.reset();
  EXPECT_EQ(g_host_value_destroyed.load(), 0) << "host value destroyed while a run holds it";
  EXPECT_EQ(g_value_destroyed.load(), 1) << "kept value destroyed before gf_run_destroy";
  run.reset();
  EXPECT_TRUE(wait_until(
      [] { return g_value_destroyed.load() >= 2 && g_host_value_destroyed.load() >= 1; }, 5000ms));
  pool.reset();
  EXPECT_EQ(g_value_destroyed.load(), 2);
  EXPECT_EQ(g_host_value_destroyed.load(), 1);
}

TEST(Run, SetValueFailureLeavesOwnershipWithTheCaller) {
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  gf_data buf = must_add_buffer(g.get(), "not_a_value", 8);
  auto status = std::make_shared<std::atomic<int>>(0);
  TaskSpec s;
  s.name = "misuses_set_value";
  s.outputs = {buf};
  s.cpu = [status](gf_task_ctx *ctx) {
    std::atomic<int> destroyed{0};
    auto *t = new Tracked{&destroyed, 1};
    // Output 3 does not exist: must fail and leave t to us.
    const gf_status st = gf_task_ctx_set_value(ctx, 3, t, destroy_tracked, 8);
    status->store(static_cast<int>(st));
    EXPECT_EQ(destroyed.load(), 0);
    delete t;
    void *o = nullptr;
    return gf_task_ctx_output(&o, ctx, 0, 8) == GF_OK ? 0 : 1;
  };
  must_add_task(g.get(), s);
  RunPtr run = run_graph(pool.get(), g.get());
  EXPECT_EQ(status->load(), static_cast<int>(GF_ERR_INVALID_ARGUMENT));
}

// --- Host inputs -----------------------------------------------------------------------------

TEST(Run, HostBuffersCopiedAndBorrowed) {
  Pool pool = make_pool(host_config(1, 1));
  Graph g = make_graph();
  std::vector<unsigned char> copied(1000), borrowed(3000);
  for (size_t i = 0; i < copied.size(); ++i) copied[i] = pattern_byte(1, i);
  for (size_t i = 0; i < borrowed.size(); ++i) borrowed[i] = pattern_byte(2, i);
  gf_data dc{0}, db{0};
  GF_ASSERT_OK(gf_graph_add_host_buffer(&dc, g.get(), "copied", copied.data(), copied.size(), 0));
  GF_ASSERT_OK(gf_graph_add_host_buffer(&db, g.get(), "borrowed", borrowed.data(), borrowed.size(),
                                        GF_HOST_BUFFER_BORROW));
  // Without BORROW the bytes were copied during the call: changing them now has no effect.
  std::fill(copied.begin(), copied.end(), static_cast<unsigned char>(0));

  auto ok = std::make_shared<std::atomic<int>>(0);
  for (int kind = 0; kind < 2; ++kind) {
    TaskSpec s;
    s.name = kind == 0 ? "reads_on_cpu" : "reads_on_gpu";
    s.inputs = {dc, db};
    Body body = [ok](gf_task_ctx *ctx) {
      const void *p = nullptr;
      uint64_t n = 0;
      bool good = gf_task_ctx_input(&p, &n, ctx, 0) == GF_OK && n == 1000 &&
                  check_pattern(static_cast<const unsigned char *>(p), n, 1);
      good = good && gf_task_ctx_input(&p, &n, ctx, 1) == GF_OK && n == 3000 &&
             check_pattern(static_cast<const unsigned char *>(p), n, 2);
      if (good) ok->fetch_add(1);
      return 0;
    };
    if (kind == 0)
      s.cpu = body;
    else
      s.gpu = body;
    must_add_task(g.get(), s);
  }
  RunPtr run = run_graph(pool.get(), g.get());
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(ok->load(), 2);
  // Host inputs can be fetched.
  std::vector<unsigned char> back = fetch(run.get(), db);
  EXPECT_EQ(back, borrowed);
  back = fetch(run.get(), dc);
  ASSERT_EQ(back.size(), 1000u);
  EXPECT_TRUE(check_pattern(back.data(), 1000, 1));
}

TEST(Run, DynamicSizeOutputs) {
  Pool pool = make_pool(host_config(1, 1));
  Graph g = make_graph();
  gf_data dyn = must_add_buffer(g.get(), "dynamic", 0);
  gf_data kept = must_add_buffer(g.get(), "dynamic_kept", 0, GF_DATA_KEEP);
  TaskSpec p;
  p.name = "sizes_at_run_time";
  p.outputs = {dyn, kept};
  p.gpu = [](gf_task_ctx *ctx) {
    return write_pattern(ctx, 0, 1234, 5) && write_pattern(ctx, 1, 777, 6) ? 0 : 1;
  };
  must_add_task(g.get(), p);
  auto seen = std::make_shared<std::atomic<uint64_t>>(0);
  TaskSpec c;
  c.name = "reads_dynamic";
  c.inputs = {dyn, kept};
  c.cpu = [seen](gf_task_ctx *ctx) {
    const void *q = nullptr;
    uint64_t n = 0;
    if (gf_task_ctx_input(&q, &n, ctx, 0) != GF_OK) return 1;
    if (check_pattern(static_cast<const unsigned char *>(q), n, 5)) seen->store(n);
    return 0;
  };
  must_add_task(g.get(), c);
  RunPtr run = run_graph(pool.get(), g.get());
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(seen->load(), 1234u);
  std::vector<unsigned char> bytes = fetch(run.get(), kept);
  ASSERT_EQ(bytes.size(), 777u);
  EXPECT_TRUE(check_pattern(bytes.data(), 777, 6));
}

// --- Failures and retries --------------------------------------------------------------------

TEST(Run, FailurePropagatesToDependentsOnly) {
  Pool pool = make_pool(host_config(2, -1));
  Graph g = make_graph();
  auto dependents_ran = std::make_shared<std::atomic<int>>(0);
  auto independent_ran = std::make_shared<std::atomic<int>>(0);
  gf_data ad = must_add_buffer(g.get(), "a_out", 8);
  gf_data bd = must_add_buffer(g.get(), "b_out", 8);
  TaskSpec a;
  a.name = "alpha_fails";
  a.outputs = {ad};
  a.cpu = [](gf_task_ctx *ctx) {
    gf_task_ctx_fail(ctx, "boom: disk on fire");
    return 1;
  };
  gf_task ta = must_add_task(g.get(), a);
  TaskSpec b;
  b.name = "beta";
  b.inputs = {ad};
  b.outputs = {bd};
  b.cpu = counting_body(dependents_ran);
  gf_task tb = must_add_task(g.get(), b);
  TaskSpec c;
  c.name = "gamma";
  c.inputs = {bd};
  c.cpu = counting_body(dependents_ran);
  gf_task tc = must_add_task(g.get(), c);
  TaskSpec e;
  e.name = "delta";
  e.after = {ta};
  e.cpu = counting_body(dependents_ran);
  gf_task te = must_add_task(g.get(), e);
  gf_data dd = must_add_buffer(g.get(), "d_out", 8);
  TaskSpec d;
  d.name = "epsilon";
  d.outputs = {dd};
  d.cpu = [independent_ran](gf_task_ctx *ctx) {
    independent_ran->fetch_add(1);
    void *o = nullptr;
    return gf_task_ctx_output(&o, ctx, 0, 8) == GF_OK ? 0 : 1;
  };
  gf_task td = must_add_task(g.get(), d);

  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  const gf_status s = gf_run_wait(run.get(), kWaitMs);
  const std::string msg = last_error();
  EXPECT_EQ(s, GF_ERR_TASK_FAILED) << msg;
  EXPECT_TRUE(contains(msg, "alpha_fails")) << msg;
  EXPECT_TRUE(contains(msg, "boom: disk on fire")) << msg;
  EXPECT_EQ(run_state(run.get()), GF_RUN_FAILED);

  EXPECT_EQ(task_state(run.get(), ta), GF_TASK_FAILED);
  EXPECT_TRUE(contains(task_error(run.get(), ta), "boom: disk on fire"))
      << task_error(run.get(), ta);
  for (gf_task t : {tb, tc, te}) {
    EXPECT_EQ(task_state(run.get(), t), GF_TASK_FAILED);
    EXPECT_FALSE(task_error(run.get(), t).empty()) << "dependents say why they did not run";
    uint32_t w = 0;
    GF_EXPECT_STATUS(GF_ERR_STATE, gf_run_task_worker(&w, run.get(), t));
  }
  EXPECT_EQ(dependents_ran->load(), 0);
  EXPECT_EQ(independent_ran->load(), 1);
  EXPECT_EQ(task_state(run.get(), td), GF_TASK_SUCCEEDED);

  uint64_t size = 0;
  GF_EXPECT_STATUS(GF_ERR_STATE, gf_run_fetch(&size, run.get(), ad, nullptr, 0));
  GF_EXPECT_OK(gf_run_fetch(&size, run.get(), dd, nullptr, 0));
  const gf_run_stats st = run_stats(run.get());
  EXPECT_EQ(st.tasks, 5u);
  EXPECT_EQ(st.succeeded, 1u);
  EXPECT_EQ(st.failed, 4u);
  EXPECT_EQ(st.attempts, 2u);
  expect_ledger_idle(pool.get());
}

TEST(Run, NonZeroReturnWithoutMessageFails) {
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  TaskSpec s;
  s.name = "silent_failure";
  s.cpu = [](gf_task_ctx *) { return 42; };
  gf_task t = must_add_task(g.get(), s);
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  const std::string msg = GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run.get(), kWaitMs));
  EXPECT_TRUE(contains(msg, "silent_failure")) << msg;
  EXPECT_EQ(task_state(run.get(), t), GF_TASK_FAILED);
}

// A body that fails its first `failures` attempts and records the attempt numbers it saw.
struct Flaky {
  uint32_t failures;
  std::atomic<uint32_t> calls{0};
  std::atomic<bool> attempts_in_order{true};
};

RunPtr run_flaky(gf_pool *pool, std::shared_ptr<Flaky> f, uint32_t retries, gf_task *out,
                 gf_status want) {
  Graph g = make_graph();
  TaskSpec s;
  s.name = "flaky";
  s.retries = retries;
  s.cpu = [f](gf_task_ctx *ctx) {
    const uint32_t n = f->calls.fetch_add(1) + 1;
    if (task_env(ctx).attempt != n) f->attempts_in_order.store(false);
    if (n <= f->failures) {
      gf_task_ctx_fail(ctx, ("attempt " + std::to_string(n) + " failed").c_str());
      return 1;
    }
    return 0;
  };
  *out = must_add_task(g.get(), s);
  return run_graph(pool, g.get(), want);
}

TEST(Run, RetriesUntilSuccess) {
  Pool pool = make_pool(host_config(1, -1));
  auto f = std::make_shared<Flaky>();
  f->failures = 2;
  gf_task t{0};
  RunPtr run = run_flaky(pool.get(), f, 2, &t, GF_OK);
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(f->calls.load(), 3u);
  EXPECT_TRUE(f->attempts_in_order.load()) << "gf_task_env.attempt must count 1, 2, 3";
  uint32_t attempts = 0;
  GF_EXPECT_OK(gf_run_task_attempts(&attempts, run.get(), t));
  EXPECT_EQ(attempts, 3u);
  EXPECT_EQ(task_state(run.get(), t), GF_TASK_SUCCEEDED);
  EXPECT_EQ(task_error(run.get(), t), "");
  EXPECT_EQ(run_stats(run.get()).attempts, 3u);

  // More retries than needed: stops at the first success.
  auto f2 = std::make_shared<Flaky>();
  f2->failures = 1;
  RunPtr run2 = run_flaky(pool.get(), f2, 5, &t, GF_OK);
  EXPECT_EQ(f2->calls.load(), 2u);
}

TEST(Run, RetriesExhausted) {
  Pool pool = make_pool(host_config(1, -1));
  auto f = std::make_shared<Flaky>();
  f->failures = 3;
  gf_task t{0};
  RunPtr run = run_flaky(pool.get(), f, 1, &t, GF_ERR_TASK_FAILED);
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(f->calls.load(), 2u);
  uint32_t attempts = 0;
  GF_EXPECT_OK(gf_run_task_attempts(&attempts, run.get(), t));
  EXPECT_EQ(attempts, 2u);
  EXPECT_EQ(task_state(run.get(), t), GF_TASK_FAILED);
  EXPECT_TRUE(contains(task_error(run.get(), t), "attempt 2 failed")) << task_error(run.get(), t);
}

// --- Cancellation and waiting ----------------------------------------------------------------

// A graph whose first task blocks until released (or, with `until_cancelled`, until it observes
// cancellation), followed by dependents and queued independent work on a single CPU worker.
struct Blocked {
  std::shared_ptr<std::atomic<bool>> release = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<bool>> started = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<bool>> saw_cancel = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<int>> others_ran = std::make_shared<std::atomic<int>>(0);
  Graph graph;
  gf_task blocker{0};
  std::vector<gf_task> others;
  gf_data out{0};
};

Blocked blocked_graph(bool until_cancelled) {
  Blocked b;
  b.graph = make_graph();
  b.out = must_add_buffer(b.graph.get(), "blocker_out", 8);
  TaskSpec s;
  s.name = "blocker";
  s.outputs = {b.out};
  s.cpu = [release = b.release, started = b.started, saw = b.saw_cancel,
           until_cancelled](gf_task_ctx *ctx) {
    started->store(true);
    wait_until([&] {
      if (gf_task_ctx_cancelled(ctx)) saw->store(true);
      return release->load() || (until_cancelled && saw->load());
    });
    void *o = nullptr;
    return gf_task_ctx_output(&o, ctx, 0, 8) == GF_OK ? 0 : 1;
  };
  b.blocker = must_add_task(b.graph.get(), s);
  for (int i = 0; i < 6; ++i) {
    TaskSpec t;
    t.name = "other" + std::to_string(i);
    if (i < 3) t.inputs = {b.out};  // dependents; the rest wait behind the only worker
    t.cpu = counting_body(b.others_ran);
    b.others.push_back(must_add_task(b.graph.get(), t));
  }
  return b;
}

TEST(Run, CancelMidRun) {
  Pool pool = make_pool(host_config(1, -1));
  Blocked b = blocked_graph(true);
  RunPtr run(submit(pool.get(), b.graph.get()));
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(wait_until([&] { return b.started->load(); }));
  EXPECT_EQ(task_state(run.get(), b.blocker), GF_TASK_RUNNING);
  GF_EXPECT_OK(gf_run_cancel(run.get()));
  const std::string msg = GF_EXPECT_STATUS(GF_ERR_CANCELLED, gf_run_wait(run.get(), kWaitMs));
  EXPECT_TRUE(b.saw_cancel->load()) << "the running body never observed gf_task_ctx_cancelled";
  EXPECT_EQ(b.others_ran->load(), 0) << "tasks started after cancellation";
  EXPECT_EQ(run_state(run.get()), GF_RUN_CANCELLED);
  for (gf_task t : b.others) EXPECT_EQ(task_state(run.get(), t), GF_TASK_CANCELLED);
  const gf_run_stats st = run_stats(run.get());
  EXPECT_GE(st.cancelled, 6u);
  EXPECT_EQ(st.attempts, 1u);
  GF_EXPECT_OK(gf_run_cancel(run.get()));  // cancelling a finished run changes nothing
  EXPECT_EQ(run_state(run.get()), GF_RUN_CANCELLED);
  expect_ledger_idle(pool.get());
  run.reset();
  expect_ledger_idle(pool.get());
}

TEST(Run, CancelWaitsForRunningBody) {
  Pool pool = make_pool(host_config(1, -1));
  Blocked b = blocked_graph(false);  // ignores cancellation until released
  RunPtr run(submit(pool.get(), b.graph.get()));
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(wait_until([&] { return b.started->load(); }));
  GF_EXPECT_OK(gf_run_cancel(run.get()));
  // The body is still running, so the run has not finished.
  GF_EXPECT_STATUS(GF_TIMEOUT, gf_run_wait(run.get(), 20));
  EXPECT_EQ(run_state(run.get()), GF_RUN_RUNNING);
  b.release->store(true);
  GF_EXPECT_STATUS(GF_ERR_CANCELLED, gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(b.others_ran->load(), 0);
  EXPECT_EQ(run_state(run.get()), GF_RUN_CANCELLED);
}

TEST(Run, CancelAfterSuccessKeepsSuccess) {
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  TaskSpec s;
  s.name = "quick";
  s.cpu = [](gf_task_ctx *) { return 0; };
  must_add_task(g.get(), s);
  RunPtr run = run_graph(pool.get(), g.get());
  ASSERT_NE(run, nullptr);
  GF_EXPECT_OK(gf_run_cancel(run.get()));
  EXPECT_EQ(run_state(run.get()), GF_RUN_SUCCEEDED);
  GF_EXPECT_OK(gf_run_wait(run.get(), 0));
}

TEST(Run, WaitTimeoutAndPoll) {
  Pool pool = make_pool(host_config(1, -1));
  Blocked b = blocked_graph(false);
  RunPtr run(submit(pool.get(), b.graph.get()));
  ASSERT_NE(run, nullptr);
  GF_EXPECT_STATUS(GF_TIMEOUT, gf_run_wait(run.get(), 30));
  EXPECT_STREQ(gf_last_error(), "") << "GF_TIMEOUT is not an error";
  GF_EXPECT_STATUS(GF_TIMEOUT, gf_run_poll(run.get()));
  GF_EXPECT_STATUS(GF_TIMEOUT, gf_run_wait(run.get(), 0));
  EXPECT_EQ(run_state(run.get()), GF_RUN_RUNNING);
  // Fetching what is not produced yet is a state error.
  uint64_t size = 0;
  GF_EXPECT_STATUS(GF_ERR_STATE, gf_run_fetch(&size, run.get(), b.out, nullptr, 0));
  b.release->store(true);
  GF_EXPECT_OK(gf_run_wait(run.get(), -1));
  GF_EXPECT_OK(gf_run_poll(run.get()));
  EXPECT_EQ(b.others_ran->load(), 6);
}

struct CallbackLog {
  std::atomic<int> calls{0};
  std::atomic<int> state{0};
  std::atomic<int> state_seen_inside{0};
  std::atomic<bool> poll_ok_inside{false};
};

void on_complete(gf_run *run, gf_run_state state, void *user) {
  auto *log = static_cast<CallbackLog *>(user);
  log->state.store(static_cast<int>(state));
  gf_run_state inside{};
  if (gf_run_state_get(&inside, run) == GF_OK)
    log->state_seen_inside.store(static_cast<int>(inside));
  const gf_status p = gf_run_poll(run);
  log->poll_ok_inside.store(p != GF_TIMEOUT);
  log->calls.fetch_add(1);
}

TEST(Run, CompletionCallbackFiresOnceWithFinalState) {
  Pool pool = make_pool(host_config(1, -1));
  for (int outcome = 0; outcome < 3; ++outcome) {  // succeeded, failed, cancelled
    CallbackLog log;
    gf_submit_options opts = GF_SUBMIT_OPTIONS_INIT;
    opts.on_complete = on_complete;
    opts.user_data = &log;
    Blocked b = blocked_graph(true);
    if (outcome == 1) {
      TaskSpec f;
      f.name = "fails";
      f.cpu = [](gf_task_ctx *) { return 1; };
      must_add_task(b.graph.get(), f);
    }
    gf_run *raw = nullptr;
    GF_ASSERT_OK(gf_graph_submit(&raw, pool.get(), b.graph.get(), &opts));
    RunPtr run(raw);
    ASSERT_TRUE(wait_until([&] { return b.started->load(); }));
    EXPECT_EQ(log.calls.load(), 0) << "callback before the run finished";
    if (outcome == 2)
      GF_EXPECT_OK(gf_run_cancel(run.get()));
    else
      b.release->store(true);
    gf_run_wait(run.get(), kWaitMs);
    EXPECT_TRUE(wait_until([&] { return log.calls.load() >= 1; }, 5000ms)) << "outcome " << outcome;
    const gf_run_state want = outcome == 0   ? GF_RUN_SUCCEEDED
                              : outcome == 1 ? GF_RUN_FAILED
                                             : GF_RUN_CANCELLED;
    EXPECT_EQ(log.state.load(), static_cast<int>(want)) << "outcome " << outcome;
    EXPECT_EQ(log.state_seen_inside.load(), static_cast<int>(want)) << "outcome " << outcome;
    EXPECT_TRUE(log.poll_ok_inside.load()) << "the run is finished when its callback runs";
    GF_EXPECT_OK(gf_run_cancel(run.get()));
    run.reset();
    EXPECT_EQ(log.calls.load(), 1) << "outcome " << outcome;
  }
}

TEST(Run, FdBecomesReadableOnCompletion) {
  Pool pool = make_pool(host_config(1, -1));
  Blocked b = blocked_graph(false);
  RunPtr run(submit(pool.get(), b.graph.get()));
  ASSERT_NE(run, nullptr);
  int fd = -1;
  GF_ASSERT_OK(gf_run_fd(&fd, run.get()));
  ASSERT_GE(fd, 0);
  int fd2 = -1;
  GF_EXPECT_OK(gf_run_fd(&fd2, run.get()));
  EXPECT_EQ(fd2, fd);
  ASSERT_TRUE(wait_until([&] { return b.started->load(); }));
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 20), 0) << "readable before the run finished";
  b.release->store(true);
  p.revents = 0;
  ASSERT_EQ(::poll(&p, 1, 30000), 1) << "not readable after completion";
  EXPECT_TRUE(p.revents & POLLIN);
  EXPECT_EQ(gf_run_poll(run.get()), GF_OK) << "fd readable but run not finished";
  p.revents = 0;
  EXPECT_EQ(::poll(&p, 1, 0), 1) << "must stay readable";
}

TEST(Run, FdOfAFinishedRunIsReadable) {
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  TaskSpec s;
  s.name = "quick";
  s.cpu = [](gf_task_ctx *) { return 0; };
  must_add_task(g.get(), s);
  RunPtr run = run_graph(pool.get(), g.get());
  ASSERT_NE(run, nullptr);
  int fd = -1;
  GF_ASSERT_OK(gf_run_fd(&fd, run.get()));
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 1);
}

TEST(Run, FetchingFreedIntermediateIsStateError) {
  Pool pool = make_pool(host_config(1, 1));
  Graph g = make_graph();
  gf_data mid = must_add_buffer(g.get(), "intermediate", 64);
  gf_data kept_mid = must_add_buffer(g.get(), "kept_intermediate", 64, GF_DATA_KEEP);
  TaskSpec a;
  a.name = "make";
  a.outputs = {mid, kept_mid};
  a.gpu = [](gf_task_ctx *ctx) {
    return write_pattern(ctx, 0, 64, 1) && write_pattern(ctx, 1, 64, 2) ? 0 : 1;
  };
  must_add_task(g.get(), a);
  TaskSpec b;
  b.name = "consume";
  b.inputs = {mid, kept_mid};
  b.cpu = [](gf_task_ctx *) { return 0; };
  must_add_task(g.get(), b);
  RunPtr run = run_graph(pool.get(), g.get());
  ASSERT_NE(run, nullptr);
  uint64_t size = 0;
  const std::string msg =
      GF_EXPECT_STATUS(GF_ERR_STATE, gf_run_fetch(&size, run.get(), mid, nullptr, 0));
  EXPECT_FALSE(msg.empty());
  std::vector<unsigned char> bytes = fetch(run.get(), kept_mid);
  ASSERT_EQ(bytes.size(), 64u);
  EXPECT_TRUE(check_pattern(bytes.data(), 64, 2));
}

// --- Graph reuse -----------------------------------------------------------------------------

TEST(Run, GraphCanBeSubmittedAgainButNotModified) {
  Pool pool = make_pool(host_config(2, 1));
  Graph g = make_graph();
  auto runs = std::make_shared<std::atomic<int>>(0);
  gf_data out = must_add_buffer(g.get(), "out", 4);
  TaskSpec s;
  s.name = "count";
  s.outputs = {out};
  s.cpu = [runs](gf_task_ctx *ctx) {
    const int n = runs->fetch_add(1) + 1;
    void *o = nullptr;
    if (gf_task_ctx_output(&o, ctx, 0, 4) != GF_OK) return 1;
    std::memcpy(o, &n, 4);
    return 0;
  };
  gf_task t = must_add_task(g.get(), s);
  TaskSpec other;
  other.name = "other";
  other.cpu = [](gf_task_ctx *) { return 0; };
  gf_task t_other = must_add_task(g.get(), other);
  RunPtr r1 = run_graph(pool.get(), g.get());
  ASSERT_NE(r1, nullptr);

  gf_task t2{0};
  TaskSpec late;
  late.name = "late";
  late.cpu = [](gf_task_ctx *) { return 0; };
  GF_EXPECT_STATUS(GF_ERR_STATE, add_task(&t2, g.get(), late));
  gf_data d{0};
  gf_buffer_desc bd = GF_BUFFER_DESC_INIT;
  bd.size = 4;
  GF_EXPECT_STATUS(GF_ERR_STATE, gf_graph_add_buffer(&d, g.get(), &bd));
  GF_EXPECT_STATUS(GF_ERR_STATE, gf_graph_add_value(&d, g.get(), "v", 1, 0));
  const char bytes[4] = {};
  GF_EXPECT_STATUS(GF_ERR_STATE, gf_graph_add_host_buffer(&d, g.get(), "h", bytes, 4, 0));
  GF_EXPECT_STATUS(GF_ERR_STATE, gf_graph_add_dependency(g.get(), t_other, t));
  uint64_t count = 0;
  GF_EXPECT_OK(gf_graph_task_count(&count, g.get()));
  EXPECT_EQ(count, 2u);

  // Submitted again, twice at once; each run has its own results.
  RunPtr r2(submit(pool.get(), g.get()));
  RunPtr r3(submit(pool.get(), g.get()));
  ASSERT_TRUE(r2 && r3);
  GF_EXPECT_OK(gf_run_wait(r2.get(), kWaitMs));
  GF_EXPECT_OK(gf_run_wait(r3.get(), kWaitMs));
  EXPECT_EQ(runs->load(), 3);
  int values[3] = {};
  gf_run *all[3] = {r1.get(), r2.get(), r3.get()};
  for (int i = 0; i < 3; ++i) {
    uint64_t size = 0;
    GF_EXPECT_OK(gf_run_fetch(&size, all[i], out, &values[i], 4));
  }
  std::sort(std::begin(values), std::end(values));
  EXPECT_EQ(values[0], 1);
  EXPECT_EQ(values[1], 2);
  EXPECT_EQ(values[2], 3);
}

TEST(Run, GraphDestroyedWhileRunIsAlive) {
  Pool pool = make_pool(host_config(1, 1));
  Blocked b = blocked_graph(false);
  RunPtr run(submit(pool.get(), b.graph.get()));
  ASSERT_NE(run, nullptr);
  b.graph.reset();  // the run keeps the graph's contents alive
  b.release->store(true);
  GF_EXPECT_OK(gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(b.others_ran->load(), 6);
  for (gf_task t : b.others) EXPECT_EQ(task_state(run.get(), t), GF_TASK_SUCCEEDED);
}

TEST(Run, ThrowingBodyKeepsWhatInTheTaskError) {
  // On both kinds of worker: a std::exception's what() reaches the task's error; anything else
  // is reported generically. Both fail only their task.
  Pool pool = make_pool(host_config(1, 1));
  Graph g = make_graph();
  TaskSpec s;
  s.name = "thrower_cpu";
  s.cpu = [](gf_task_ctx *) -> int { throw std::runtime_error("disk full on /scratch"); };
  gf_task on_cpu = must_add_task(g.get(), s);
  s.name = "thrower_gpu";
  s.cpu = nullptr;
  s.gpu = [](gf_task_ctx *) -> int { throw std::out_of_range("index 12 past 10"); };
  gf_task on_gpu = must_add_task(g.get(), s);
  s.name = "thrower_other";
  s.gpu = nullptr;
  s.cpu = [](gf_task_ctx *) -> int { throw 42; };
  gf_task other = must_add_task(g.get(), s);
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(gf_run_wait(run.get(), kWaitMs), GF_ERR_TASK_FAILED);
  auto error = [&](gf_task t) {
    const char *e = nullptr;
    EXPECT_EQ(gf_run_task_error(&e, run.get(), t), GF_OK);
    return std::string(e ? e : "");
  };
  EXPECT_NE(error(on_cpu).find("the body threw a C++ exception: disk full on /scratch"),
            std::string::npos)
      << error(on_cpu);
  EXPECT_NE(error(on_gpu).find("the body threw a C++ exception: index 12 past 10"),
            std::string::npos)
      << error(on_gpu);
  EXPECT_NE(error(other).find("the body threw a C++ exception"), std::string::npos) << error(other);
}

// A graph with more data objects than prepare() sets up inline (65,536: a helper thread sets
// them up while the caller freezes the graph) starts exactly as a small one: host inputs ready
// with the caller's bytes, every consumer counted, kept results readable, consumed ones freed.
constexpr uint32_t kLargePairs = 15000;  // 30,000 inputs + 30,000 doubles + 15,000 sums

extern "C" int double_input(gf_task_ctx *ctx, void *) {
  const void *in = nullptr;
  uint64_t size = 0;
  void *out = nullptr;
  if (gf_task_ctx_input(&in, &size, ctx, 0) != GF_OK || size != 8) return 1;
  if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
  const uint64_t v = *static_cast<const uint64_t *>(in) * 2;
  std::memcpy(out, &v, 8);
  return 0;
}

extern "C" int add_inputs(gf_task_ctx *ctx, void *) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < 2; ++i) {
    const void *in = nullptr;
    uint64_t size = 0;
    if (gf_task_ctx_input(&in, &size, ctx, i) != GF_OK || size != 8) return 1;
    sum += *static_cast<const uint64_t *>(in);
  }
  void *out = nullptr;
  if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
  std::memcpy(out, &sum, 8);
  return 0;
}

struct LargeGraph {
  Graph graph = make_graph();
  std::vector<uint64_t> inputs;  // borrowed by the graph
  std::vector<gf_data> doubles, sums;
  std::vector<gf_task> sum_tasks;
};

// inputs[i] = i; doubles[i] = 2 * inputs[i]; sums[k] = doubles[2k] + doubles[2k + 1], kept
// (explicitly every 1000th; the rest because nothing consumes them).
std::unique_ptr<LargeGraph> large_graph() {
  auto l = std::make_unique<LargeGraph>();
  gf_graph *g = l->graph.get();
  l->inputs.resize(2 * kLargePairs);
  for (uint32_t i = 0; i < 2 * kLargePairs; ++i) l->inputs[i] = i;
  gf_task_desc d = GF_TASK_DESC_INIT;
  d.input_count = d.output_count = 1;
  d.cpu_fn = double_input;
  for (uint32_t i = 0; i < 2 * kLargePairs; ++i) {
    gf_data in{0};
    EXPECT_EQ(gf_graph_add_host_buffer(&in, g, nullptr, &l->inputs[i], 8, GF_HOST_BUFFER_BORROW),
              GF_OK);
    l->doubles.push_back(must_add_buffer(g, nullptr, 8));
    d.inputs = &in;
    d.outputs = &l->doubles.back();
    gf_task t{0};
    EXPECT_EQ(gf_graph_add_task(&t, g, &d), GF_OK) << last_error();
  }
  d.cpu_fn = add_inputs;
  d.input_count = 2;
  for (uint32_t k = 0; k < kLargePairs; ++k) {
    l->sums.push_back(must_add_buffer(g, nullptr, 8, k % 1000 == 0 ? GF_DATA_KEEP : 0));
    d.inputs = &l->doubles[2 * k];
    d.outputs = &l->sums.back();
    gf_task t{0};
    EXPECT_EQ(gf_graph_add_task(&t, g, &d), GF_OK) << last_error();
    l->sum_tasks.push_back(t);
  }
  return l;
}

TEST(Run, ALargeGraphStartsWithItsDataAsASmallOneDoes) {
  Pool pool = make_pool(host_config(2, -1));
  auto l = large_graph();
  uint64_t data = 0;
  GF_ASSERT_OK(gf_graph_data_count(&data, l->graph.get()));
  ASSERT_GE(data, 65536u);                      // past prepare()'s inline setup
  for (int repeat = 0; repeat < 2; ++repeat) {  // the graph runs twice: its analysis is kept
    RunPtr run = run_graph(pool.get(), l->graph.get());
    ASSERT_NE(run, nullptr);
    for (uint32_t k = 0; k < kLargePairs; k += 997) {
      std::vector<unsigned char> bytes = fetch(run.get(), l->sums[k]);
      ASSERT_EQ(bytes.size(), 8u);
      uint64_t sum = 0;
      std::memcpy(&sum, bytes.data(), 8);
      EXPECT_EQ(sum, 2 * (2 * k) + 2 * (2 * k + 1)) << "sum " << k;
    }
    // Consumed by their sums and not kept: freed, so not readable.
    uint64_t size = 0;
    EXPECT_NE(gf_run_fetch(&size, run.get(), l->doubles[7], nullptr, 0), GF_OK);
    gf_run_stats stats = run_stats(run.get());
    EXPECT_EQ(stats.succeeded, 3u * kLargePairs);
  }
}

TEST(Run, ALargeGraphThatCannotBeFrozenLeavesThePoolAsItWas) {
  // Its data is being set up when the graph turns out to have a cycle.
  Pool pool = make_pool(host_config(2, -1));
  auto l = large_graph();
  GF_ASSERT_OK(gf_graph_add_dependency(l->graph.get(), l->sum_tasks[0], l->sum_tasks[1]));
  GF_ASSERT_OK(gf_graph_add_dependency(l->graph.get(), l->sum_tasks[1], l->sum_tasks[0]));
  gf_run *run = nullptr;
  const std::string m = GF_EXPECT_STATUS(
      GF_ERR_INVALID_GRAPH, gf_graph_submit(&run, pool.get(), l->graph.get(), nullptr));
  EXPECT_EQ(run, nullptr);
  EXPECT_TRUE(contains(m, "cycle")) << m;
  auto fine = large_graph();
  RunPtr ok = run_graph(pool.get(), fine->graph.get());
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(run_stats(ok.get()).succeeded, 3u * kLargePairs);
}

}  // namespace
