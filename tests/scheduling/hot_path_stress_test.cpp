// hot_path_stress_test.cpp: the scheduler's hot path under load. Many workers take tiny tasks in
// long batches, steal from each other's ready queues and from device workers, while several
// threads submit random graphs and others cancel runs mid-flight. Every body checks what a user
// relies on: its inputs hold what their producers wrote, tasks holding a resource never overlap on
// a device, each task runs at most once, and a task runs only after everything it depends on.
// Sized to take a few seconds, sanitizers included (the TSan build is where its races show).
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cancel_midway.hpp"
#include "test_support.hpp"

using namespace gft;

namespace {

// A uniform-enough draw in [0, n) of the width the call sites want.
uint32_t below(std::mt19937 &rng, uint32_t n) {
  return static_cast<uint32_t>(rng() % n);
}

constexpr int32_t kCpuWorkers = 8;
constexpr uint32_t kMaxWorkers = 16;

// What the bodies of one graph report into; shared by the bodies, so it outlives the graph.
struct Record {
  explicit Record(size_t tasks) : ran(tasks) {}
  std::vector<std::atomic<int>> ran;       // body invocations per task
  std::atomic<int> in_use[kMaxWorkers]{};  // tasks holding GPU=1 now, per worker
  std::atomic<int> problems{0};
  std::atomic<int> out_of_order{0};  // a task ran before a task it depends on had finished
};

struct Dag {
  Graph graph;
  std::vector<gf_task> tasks;
  std::vector<gf_data> outputs;  // by task
  std::vector<uint64_t> expected;
  std::vector<bool> sink;  // output read by no task: kept, so it can be fetched
  std::shared_ptr<Record> record;
};

uint64_t read_input(gf_task_ctx *ctx, uint32_t i, Record &rec) {
  const void *p = nullptr;
  uint64_t n = 0, v = 0;
  if (gf_task_ctx_input(&p, &n, ctx, i) != GF_OK || n != sizeof v) {
    rec.problems.fetch_add(1);
    return 0;
  }
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A random DAG of `n` tasks. Task i writes 8 bytes: i + the sum of its inputs, read from up to
// three tasks among the 64 before it; some only order themselves after an earlier task; a fifth
// hold cpu=1 (never batched: charged in the ledger). With devices, a tenth also have a GPU body
// (stolen across kinds) and a twentieth are GPU tasks holding GPU=1, which must never overlap on
// a device although each device worker runs two threads.
Dag random_dag(uint32_t n, uint32_t seed, bool gpu_bodies) {
  std::mt19937 rng(seed);
  Dag dag;
  dag.graph = make_graph();
  dag.record = std::make_shared<Record>(n);
  dag.expected.resize(n);
  std::vector<int> readers(n, 0);
  std::vector<std::vector<uint32_t>> ins(n), afters(n);
  for (uint32_t i = 0; i < n; ++i) {
    dag.outputs.push_back(must_add_buffer(dag.graph.get(), nullptr, 8));
    const uint32_t lo = i > 64 ? i - 64 : 0;
    const uint32_t inputs = i == 0 ? 0 : below(rng, 4);
    for (uint32_t k = 0; k < inputs && i > lo; ++k) ins[i].push_back(lo + below(rng, i - lo));
    if (i > 0 && below(rng, 4) == 0) afters[i].push_back(lo + below(rng, i - lo));
    dag.expected[i] = i;
    for (uint32_t j : ins[i]) {
      dag.expected[i] += dag.expected[j];
      readers[j]++;
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    auto rec = dag.record;
    std::vector<uint32_t> deps = ins[i];
    deps.insert(deps.end(), afters[i].begin(), afters[i].end());
    const uint32_t kind = below(rng, 20);
    const bool holds_gpu = gpu_bodies && kind == 0;
    const bool holds_cpu = kind >= 16;
    Body body = [rec, deps, i, holds_gpu,
                 count = static_cast<uint32_t>(ins[i].size())](gf_task_ctx *ctx) {
      Record &r = *rec;
      r.ran[i].fetch_add(1);
      for (uint32_t d : deps) {
        if (r.ran[d].load() == 0) r.out_of_order.fetch_add(1);
      }
      const gf_task_env env = task_env(ctx);
      const bool counted = holds_gpu && env.worker < kMaxWorkers;
      if (counted && r.in_use[env.worker].fetch_add(1) != 0) r.problems.fetch_add(1);
      uint64_t sum = i;
      for (uint32_t k = 0; k < count; ++k) sum += read_input(ctx, k, r);
      void *out = nullptr;
      if (gf_task_ctx_output(&out, ctx, 0, sizeof sum) != GF_OK) return 1;
      std::memcpy(out, &sum, sizeof sum);
      if (counted) r.in_use[env.worker].fetch_sub(1);
      return 0;
    };
    TaskSpec spec;
    spec.cost_key = holds_gpu ? "stress_gpu" : holds_cpu ? "stress_cpu" : "stress";
    if (holds_gpu) {
      spec.gpu = body;
      spec.resources = {{"GPU", 1.0}};
    } else {
      spec.cpu = body;
      if (gpu_bodies && kind < 3) spec.gpu = body;
      if (holds_cpu) spec.resources = {{"cpu", 1.0}};
    }
    spec.priority = below(rng, 16) == 0 ? 1 : 0;
    for (uint32_t j : ins[i]) spec.inputs.push_back(dag.outputs[j]);
    spec.outputs = {dag.outputs[i]};
    for (uint32_t j : afters[i]) spec.after.push_back(dag.tasks[j]);
    dag.tasks.push_back(must_add_task(dag.graph.get(), spec));
  }
  for (uint32_t i = 0; i < n; ++i) dag.sink.push_back(readers[i] == 0);
  return dag;
}

uint64_t fetch_u64(gf_run *run, gf_data d) {
  uint64_t v = 0, size = 0;
  EXPECT_EQ(gf_run_fetch(&size, run, d, &v, sizeof v), GF_OK) << last_error();
  return v;
}

TEST(HotPathStress, RandomDagsFromSeveralThreadsOnManyWorkers) {
  Pool pool = make_pool(host_config(kCpuWorkers, 2));
  ASSERT_LE(worker_count(pool.get()), kMaxWorkers);
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, t] {
      constexpr int kRounds = 3;
      constexpr uint32_t kTasks = 1500;
      for (int round = 0; round < kRounds; ++round) {
        Dag dag = random_dag(kTasks, static_cast<uint32_t>(t * 100 + round), true);
        RunPtr run(submit(pool.get(), dag.graph.get()));
        ASSERT_NE(run, nullptr);
        ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
        const gf_run_stats st = run_stats(run.get());
        EXPECT_EQ(st.succeeded, kTasks);
        EXPECT_EQ(st.attempts, kTasks);
        const Record &rec = *dag.record;
        EXPECT_EQ(rec.problems.load(), 0) << "a wrong input, or two GPU=1 tasks on one device";
        EXPECT_EQ(rec.out_of_order.load(), 0);
        for (uint32_t i = 0; i < kTasks; ++i) {
          EXPECT_EQ(rec.ran[i].load(), 1) << "task " << i;
          if (dag.sink[i]) {
            EXPECT_EQ(fetch_u64(run.get(), dag.outputs[i]), dag.expected[i]) << "task " << i;
          }
        }
      }
    });
  }
  for (auto &th : threads) th.join();
  expect_ledger_idle(pool.get());
}

// Runs are cancelled while tiny tasks stream through the workers' batches: whatever ran
// succeeded, only after its dependencies, and at most once; the rest is cancelled, never lost.
TEST(HotPathStress, CancellationWhileBatchesRun) {
  Pool pool = make_pool(host_config(kCpuWorkers, -1));
  std::mt19937 rng(29);
  constexpr uint32_t kTasks = 3000;
  for (int i = 0; i < 12; ++i) {
    Dag dag = random_dag(kTasks, 1000 + static_cast<uint32_t>(i), false);
    RunPtr run(submit(pool.get(), dag.graph.get()));
    ASSERT_NE(run, nullptr);
    const gf_status s =
        wait_cancelled_after(run.get(), std::chrono::microseconds(below(rng, 800)), kWaitMs);
    ASSERT_TRUE(s == GF_OK || s == GF_ERR_CANCELLED) << describe(s);
    const gf_run_stats st = run_stats(run.get());
    EXPECT_EQ(st.succeeded + st.cancelled, kTasks);
    EXPECT_EQ(st.failed, 0u);
    const Record &rec = *dag.record;
    EXPECT_EQ(rec.problems.load(), 0);
    EXPECT_EQ(rec.out_of_order.load(), 0);
    uint64_t ran = 0;
    for (uint32_t t = 0; t < kTasks; ++t) {
      const int n = rec.ran[t].load();
      EXPECT_LE(n, 1) << "task " << t;
      ran += static_cast<uint64_t>(n);
      EXPECT_EQ(task_state(run.get(), dag.tasks[t]), n ? GF_TASK_SUCCEEDED : GF_TASK_CANCELLED)
          << "task " << t;
    }
    EXPECT_EQ(ran, st.succeeded);
  }
  expect_ledger_idle(pool.get());
}

// Many chains side by side: each link must start after the previous one ended, whichever worker
// ran it, while idle workers steal the chains' heads from each other.
TEST(HotPathStress, InterleavedChainsKeepTheirOrder) {
  Pool pool = make_pool(host_config(kCpuWorkers, -1));
  constexpr uint32_t kChains = 24, kLinks = 400;
  for (int round = 0; round < 3; ++round) {
    Graph g = make_graph();
    auto next = std::make_shared<std::vector<std::atomic<uint32_t>>>(kChains);
    auto wrong = std::make_shared<std::atomic<int>>(0);
    std::vector<gf_task> last(kChains);
    for (uint32_t link = 0; link < kLinks; ++link) {
      for (uint32_t c = 0; c < kChains; ++c) {
        TaskSpec spec;
        spec.cost_key = "link";
        spec.cpu = [next, wrong, c, link](gf_task_ctx *) {
          if ((*next)[c].load() != link) wrong->fetch_add(1);
          (*next)[c].store(link + 1);
          return 0;
        };
        if (link > 0) spec.after = {last[c]};
        last[c] = must_add_task(g.get(), spec);
      }
    }
    RunPtr run(submit(pool.get(), g.get()));
    ASSERT_NE(run, nullptr);
    ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
    EXPECT_EQ(wrong->load(), 0);
    for (uint32_t c = 0; c < kChains; ++c) EXPECT_EQ((*next)[c].load(), kLinks);
  }
  expect_ledger_idle(pool.get());
}

// A wide graph of alike roots queues them in spans (scheduler/ready_queue.hpp), which workers
// pick and steal a piece at a time. Blocks of another cost key and of a higher priority break
// the spans. Several threads submit such graphs to many workers and cancel some midway: every
// task must run at most once, exactly the tasks that ran succeed, and the rest are cancelled.
TEST(HotPathStress, WideRootsInSpansRunOnceUnderStealingAndCancellation) {
  Pool pool = make_pool(host_config(kCpuWorkers, -1));
  constexpr uint32_t kTasks = 6000;
  auto submit_some = [&](uint32_t seed) {
    std::mt19937 rng(seed);
    for (int i = 0; i < 4; ++i) {
      Graph g = make_graph();
      auto ran = std::make_shared<std::vector<std::atomic<int>>>(kTasks);
      std::vector<gf_task> tasks;
      for (uint32_t t = 0; t < kTasks; ++t) {
        TaskSpec spec;
        spec.cost_key = (t / 700) % 3 == 2 ? "wide_other" : "wide";
        spec.priority = (t / 1100) % 4 == 1 ? 1 : 0;
        spec.cpu = [ran, t](gf_task_ctx *) {
          (*ran)[t].fetch_add(1);
          return 0;
        };
        tasks.push_back(must_add_task(g.get(), spec));
      }
      RunPtr run(submit(pool.get(), g.get()));
      ASSERT_NE(run, nullptr);
      const bool cancel = i % 2 == 1;
      const gf_status s =
          cancel
              ? wait_cancelled_after(run.get(), std::chrono::microseconds(below(rng, 600)), kWaitMs)
              : gf_run_wait(run.get(), kWaitMs);
      ASSERT_TRUE(s == GF_OK || (cancel && s == GF_ERR_CANCELLED)) << describe(s);
      const gf_run_stats st = run_stats(run.get());
      EXPECT_EQ(st.succeeded + st.cancelled, kTasks);
      EXPECT_EQ(st.failed, 0u);
      uint64_t ran_once = 0;
      for (uint32_t t = 0; t < kTasks; ++t) {
        const int n = (*ran)[t].load();
        EXPECT_LE(n, 1) << "task " << t;
        ran_once += static_cast<uint64_t>(n);
        EXPECT_EQ(task_state(run.get(), tasks[t]), n ? GF_TASK_SUCCEEDED : GF_TASK_CANCELLED)
            << "task " << t;
      }
      EXPECT_EQ(ran_once, st.succeeded);
      if (!cancel) {
        EXPECT_EQ(ran_once, kTasks);
      }
    }
  };
  std::vector<std::thread> submitters;
  for (uint32_t k = 0; k < 3; ++k) submitters.emplace_back(submit_some, 77 + k);
  for (std::thread &t : submitters) t.join();
  expect_ledger_idle(pool.get());
}

// Workers settle the alike tasks of a span together (Scheduler::succeed_alike). An attempt that
// fails among them, and its retry, settle on their own: every other task's output is kept and
// readable, and the counters and attempts add up task by task.
TEST(HotPathStress, FailuresAndRetriesAmongAlikeTasksSettleOnTheirOwn) {
  Pool pool = make_pool(host_config(4, -1));
  constexpr uint32_t kTasks = 4000;
  Graph g = make_graph();
  auto ran = std::make_shared<std::vector<std::atomic<int>>>(kTasks);
  auto fails_once = [](uint32_t t) { return t % 7 == 3; };
  auto fails_always = [](uint32_t t) { return t % 97 == 5; };
  std::vector<gf_task> tasks;
  std::vector<gf_data> outputs;
  for (uint32_t t = 0; t < kTasks; ++t) {
    TaskSpec spec;
    spec.cost_key = "alike";
    spec.retries = 1;
    outputs.push_back(must_add_buffer(g.get(), nullptr, sizeof(uint64_t)));
    spec.outputs = {outputs.back()};
    spec.cpu = [ran, t, fails_once, fails_always](gf_task_ctx *ctx) {
      const int attempt = (*ran)[t].fetch_add(1);
      if (fails_always(t) || (fails_once(t) && attempt == 0)) return 1;
      void *out = nullptr;
      if (gf_task_ctx_output(&out, ctx, 0, sizeof(uint64_t)) != GF_OK) return 1;
      const uint64_t value = uint64_t{t} * 3 + 1;
      std::memcpy(out, &value, sizeof value);
      return 0;
    };
    tasks.push_back(must_add_task(g.get(), spec));
  }
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(gf_run_wait(run.get(), kWaitMs), GF_ERR_TASK_FAILED);
  uint64_t failed = 0, attempts = 0;
  for (uint32_t t = 0; t < kTasks; ++t) {
    const int want_attempts = fails_always(t) || fails_once(t) ? 2 : 1;
    EXPECT_EQ((*ran)[t].load(), want_attempts) << "task " << t;
    uint32_t counted = 0;
    ASSERT_EQ(gf_run_task_attempts(&counted, run.get(), tasks[t]), GF_OK) << last_error();
    EXPECT_EQ(counted, static_cast<uint32_t>(want_attempts)) << "task " << t;
    attempts += static_cast<uint64_t>(want_attempts);
    if (fails_always(t)) {
      failed++;
      EXPECT_EQ(task_state(run.get(), tasks[t]), GF_TASK_FAILED) << "task " << t;
    } else {
      EXPECT_EQ(task_state(run.get(), tasks[t]), GF_TASK_SUCCEEDED) << "task " << t;
      EXPECT_EQ(fetch_u64(run.get(), outputs[t]), uint64_t{t} * 3 + 1) << "task " << t;
    }
  }
  const gf_run_stats st = run_stats(run.get());
  EXPECT_EQ(st.succeeded, kTasks - failed);
  EXPECT_EQ(st.failed, failed);
  EXPECT_EQ(st.attempts, attempts);
  expect_ledger_idle(pool.get());
}

// On one worker, a wide graph's roots run in the ready queue's order, spans or not: the higher
// priority first, each priority in graph order.
TEST(HotPathStress, WideRootsOnOneWorkerRunInPriorityThenGraphOrder) {
  Pool pool = make_pool(host_config(1, -1));
  constexpr uint32_t kTasks = 3000;
  Graph g = make_graph();
  auto order = std::make_shared<std::vector<uint32_t>>();
  order->reserve(kTasks);
  std::vector<uint32_t> want_high, want_low;
  for (uint32_t t = 0; t < kTasks; ++t) {
    TaskSpec spec;
    spec.cost_key = (t / 300) % 4 == 3 ? "other" : "wide";
    spec.priority = (t / 500) % 2 == 1 ? 1 : 0;
    (spec.priority ? want_high : want_low).push_back(t);
    spec.cpu = [order, t](gf_task_ctx *) {
      order->push_back(t);  // one worker, one thread: never concurrent
      return 0;
    };
    must_add_task(g.get(), spec);
  }
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
  std::vector<uint32_t> want = want_high;
  want.insert(want.end(), want_low.begin(), want_low.end());
  EXPECT_EQ(*order, want);
  expect_ledger_idle(pool.get());
}

}  // namespace
