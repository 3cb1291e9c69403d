// join_continuation_test.cpp: a worker runs a successor directly once it has counted down the
// last of its predecessors, in its own batch or after others ran on other threads, reading the
// buffers they made (issue 29, item 2: a reduction tree's sums skip placement and queueing). What a
// user relies on stays true: every sum is right and runs once, after its inputs were made; a task
// whose body ran is reported succeeded even when its run is cancelled meanwhile, and one that did
// not is cancelled; a failed sum fails exactly its ancestors; a retried sum's parent runs once,
// after the retry; a fan-out of long tasks still spreads over the workers. Each test runs its tree
// once first, so that the pool learns the sums are tiny (only tiny tasks are run this way, chain
// links aside).
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "cancel_midway.hpp"
#include "test_support.hpp"

using namespace gft;

namespace {

constexpr int kWaitMs = 60000;

struct Record {
  explicit Record(size_t tasks) : ran(tasks), succeeded(tasks) {}
  std::vector<std::atomic<int>> ran;
  std::vector<std::atomic<int>> succeeded;
  std::atomic<int> out_of_order{0};
  std::atomic<int> wrong_input{0};
};

// A binary reduction tree over `leaves` leaves: leaf i makes i + 1, each sum adds its two inputs
// (an odd one out moves up a level). fail_at / retry_at: a sum (by its index among the sums)
// whose body fails every attempt, or only the first.
struct Tree {
  Graph graph = make_graph();
  std::vector<gf_task> tasks;
  std::vector<gf_data> outputs;
  gf_data root{};
  std::shared_ptr<Record> record;
  size_t first_sum = 0;
  std::vector<int64_t> expected;  // what each task makes
  std::vector<bool> kept;         // whose output is GF_DATA_KEEP
};

int64_t read_input(gf_task_ctx *ctx, uint32_t k, Record &r) {
  const void *p = nullptr;
  uint64_t size = 0;
  if (gf_task_ctx_input(&p, &size, ctx, k) != GF_OK || size != sizeof(int64_t) || !p) {
    r.wrong_input.fetch_add(1);
    return 0;
  }
  int64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// device_every: every so many leaves (0: none) runs on a device worker only. keep_every: every so
// many tasks' outputs (0: none but the root's) are kept for the caller to fetch.
std::unique_ptr<Tree> make_tree(uint32_t leaves, int64_t fail_at = -1, int64_t retry_at = -1,
                                uint32_t device_every = 0, uint32_t keep_every = 0) {
  auto t = std::make_unique<Tree>();
  t->record = std::make_shared<Record>(size_t{leaves} * 2);
  auto add = [&](std::vector<size_t> preds, bool fails, bool fails_once) {
    const size_t index = t->tasks.size();
    const bool keep = keep_every && index % keep_every == 0;
    const gf_data out =
        must_add_buffer(t->graph.get(), nullptr, sizeof(int64_t), keep ? GF_DATA_KEEP : 0);
    int64_t expected = preds.empty() ? static_cast<int64_t>(index) + 1 : 0;
    for (size_t p : preds) expected += t->expected[p];
    t->expected.push_back(expected);
    t->kept.push_back(keep);
    TaskSpec spec;
    spec.cost_key = preds.empty() ? "leaf" : "sum";
    spec.retries = fails_once ? 1 : 0;
    spec.cpu = [rec = t->record, index, preds, fails, fails_once](gf_task_ctx *ctx) {
      Record &r = *rec;
      const int before = r.ran[index].fetch_add(1);
      int64_t value = preds.empty() ? static_cast<int64_t>(index) + 1 : 0;
      for (uint32_t k = 0; k < preds.size(); ++k) {
        if (r.succeeded[preds[k]].load() == 0) r.out_of_order.fetch_add(1);
        value += read_input(ctx, k, r);
      }
      if (fails || (fails_once && before == 0)) return 1;
      void *p = nullptr;
      if (gf_task_ctx_output(&p, ctx, 0, sizeof value) != GF_OK) return 1;
      std::memcpy(p, &value, sizeof value);
      r.succeeded[index].store(1);
      return 0;
    };
    if (preds.empty() && device_every && index % device_every == 0) std::swap(spec.cpu, spec.gpu);
    for (size_t p : preds) spec.inputs.push_back(t->outputs[p]);
    spec.outputs = {out};
    t->tasks.push_back(must_add_task(t->graph.get(), spec));
    t->outputs.push_back(out);
    return index;
  };
  std::vector<size_t> level;
  for (uint32_t i = 0; i < leaves; ++i) level.push_back(add({}, false, false));
  t->first_sum = t->tasks.size();
  while (level.size() > 1) {
    std::vector<size_t> up;
    for (size_t i = 0; i + 1 < level.size(); i += 2) {
      const auto sum = static_cast<int64_t>(t->tasks.size() - t->first_sum);
      up.push_back(add({level[i], level[i + 1]}, sum == fail_at, sum == retry_at));
    }
    if (level.size() % 2) up.push_back(level.back());
    level = std::move(up);
  }
  t->root = t->outputs[level.front()];
  return t;
}

int64_t expected_total(uint32_t leaves) {
  return int64_t{leaves} * (leaves + 1) / 2;
}

int64_t fetch_total(gf_run *run, gf_data root) {
  const std::vector<unsigned char> bytes = fetch(run, root);
  int64_t v = -1;
  if (bytes.size() == sizeof v) std::memcpy(&v, bytes.data(), sizeof v);
  return v;
}

// Runs a tree to the end once, so that the pool learns its leaves and sums are tiny.
void warm_up(gf_pool *pool, uint32_t leaves) {
  auto t = make_tree(leaves);
  RunPtr run(submit(pool, t->graph.get()));
  ASSERT_NE(run, nullptr);
  ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
  EXPECT_EQ(fetch_total(run.get(), t->root), expected_total(leaves));
}

// A tree of `leaves` run `rounds` times on `workers` CPU workers: every sum right, every task run
// once and after its inputs were made.
void expect_trees_right(int32_t workers, uint32_t leaves, int rounds) {
  Pool pool = make_pool(host_config(workers, -1));
  const uint32_t kLeaves = leaves;
  warm_up(pool.get(), kLeaves);
  for (int round = 0; round < rounds; ++round) {
    auto t = make_tree(kLeaves);
    RunPtr run(submit(pool.get(), t->graph.get()));
    ASSERT_NE(run, nullptr);
    ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
    EXPECT_EQ(fetch_total(run.get(), t->root), expected_total(kLeaves));
    EXPECT_EQ(t->record->out_of_order.load(), 0);
    EXPECT_EQ(t->record->wrong_input.load(), 0);
    const gf_run_stats st = run_stats(run.get());
    EXPECT_EQ(st.succeeded, t->tasks.size());
    EXPECT_EQ(st.attempts, t->tasks.size());
    for (size_t i = 0; i < t->tasks.size(); ++i) ASSERT_EQ(t->record->ran[i].load(), 1) << i;
  }
  expect_ledger_idle(pool.get());
}

TEST(JoinContinuation, TreeSumsAreRightAndEachTaskRunsOnce) {
  expect_trees_right(2, 20000, 3);
}

// With many workers, most sums above the leaves have inputs made on two threads: the thread that
// makes the second runs the sum at once, and the scheduler adopts it only once the other thread
// has reported the first (it parks meanwhile). Under TSan this is where a sum reading a buffer
// before its maker published it would show.
TEST(JoinContinuation, SumsOfInputsMadeOnDifferentWorkersAreRight) {
  expect_trees_right(8, 5000, 8);
}

// A tree stopped midway (cancelled, or its pool shut down): every task ran at most once, after
// its inputs, reading them right; each task whose body ran is reported succeeded and every other
// cancelled.
void expect_stopped_tree_settled(gf_run *run, const Tree &t) {
  const gf_run_stats st = run_stats(run);
  EXPECT_EQ(st.succeeded + st.cancelled, t.tasks.size());
  EXPECT_EQ(st.failed, 0u);
  EXPECT_EQ(t.record->out_of_order.load(), 0);
  EXPECT_EQ(t.record->wrong_input.load(), 0);
  uint64_t ran = 0;
  for (size_t i = 0; i < t.tasks.size(); ++i) {
    const int n = t.record->ran[i].load();
    ASSERT_LE(n, 1) << "task " << i;
    ran += static_cast<uint64_t>(n);
    ASSERT_EQ(task_state(run, t.tasks[i]), n ? GF_TASK_SUCCEEDED : GF_TASK_CANCELLED)
        << "task " << i;
  }
  EXPECT_EQ(ran, st.succeeded);
}

// Some leaves run on device workers, which count no joins down: a sum with an input made there is
// placed as usual once that leaf reports (its input copied back), while sums of inputs made on
// CPU workers still run directly. Every sum is right either way.
TEST(JoinContinuation, SumsOfInputsMadeOnDevicesAreRight) {
  Pool pool = make_pool(host_config(4, 2));
  warm_up(pool.get(), 4096);
  for (int round = 0; round < 4; ++round) {
    auto t = make_tree(4096, -1, -1, /*device_every=*/3 + round);
    RunPtr run(submit(pool.get(), t->graph.get()));
    ASSERT_NE(run, nullptr);
    ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
    EXPECT_EQ(fetch_total(run.get(), t->root), expected_total(4096));
    EXPECT_EQ(t->record->out_of_order.load(), 0);
    EXPECT_EQ(t->record->wrong_input.load(), 0);
    EXPECT_EQ(run_stats(run.get()).attempts, t->tasks.size());
    for (size_t i = 0; i < t->tasks.size(); ++i) ASSERT_EQ(t->record->ran[i].load(), 1) << i;
    gf_worker_info info = GF_WORKER_INFO_INIT;
    uint32_t worker = UINT32_MAX;
    GF_ASSERT_OK(gf_run_task_worker(&worker, run.get(), t->tasks[0]));
    GF_ASSERT_OK(gf_pool_worker_info(&info, pool.get(), worker));
    EXPECT_EQ(info.kind, GF_WORKER_GPU) << "leaf 0 is for devices only";
  }
  expect_ledger_idle(pool.get());
}

TEST(JoinContinuation, TreeCancelledMidFlight) {
  Pool pool = make_pool(host_config(4, -1));
  warm_up(pool.get(), 4096);
  std::mt19937 rng(2912);
  for (int round = 0; round < 12; ++round) {
    auto t = make_tree(16384);
    RunPtr run(submit(pool.get(), t->graph.get()));
    ASSERT_NE(run, nullptr);
    const gf_status s =
        wait_cancelled_after(run.get(), std::chrono::microseconds(rng() % 4000), kWaitMs);
    ASSERT_TRUE(s == GF_OK || s == GF_ERR_CANCELLED) << describe(s);
    expect_stopped_tree_settled(run.get(), *t);
  }
  expect_ledger_idle(pool.get());
}

// A pool shut down while sums run directly on many threads, some of them parked for another
// thread's report: the run ends (cancelled, or succeeded if it got there first), every task whose
// body ran is reported succeeded and every other cancelled, and nothing a sum made is lost or
// freed twice (the ASan build checks the leaks).
TEST(JoinContinuation, PoolShutDownWhileJoinsRunOnManyThreads) {
  std::mt19937 rng(1129);
  for (int round = 0; round < 6; ++round) {
    Pool pool = make_pool(host_config(8, -1));
    warm_up(pool.get(), 4096);
    auto t = make_tree(16384);
    RunPtr run(submit(pool.get(), t->graph.get()));
    ASSERT_NE(run, nullptr);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    pool.reset();
    const gf_status s = gf_run_wait(run.get(), kWaitMs);
    ASSERT_TRUE(s == GF_OK || s == GF_ERR_CANCELLED || s == GF_ERR_SHUT_DOWN) << describe(s);
    expect_stopped_tree_settled(run.get(), *t);
  }
}

// Outputs the caller keeps stay readable after the sums that read them ran directly; the others
// are freed by those sums (the scheduler leaves a sum's input to it only when no one else may
// read it: DataRun::Phase::kLeftToConsumer).
TEST(JoinContinuation, KeptInputsOfSumsRunDirectlyStayReadable) {
  Pool pool = make_pool(host_config(2, -1));
  warm_up(pool.get(), 2048);
  for (uint32_t keep_every : {2u, 3u, 7u}) {
    auto t = make_tree(2048, -1, -1, 0, keep_every);
    RunPtr run(submit(pool.get(), t->graph.get()));
    ASSERT_NE(run, nullptr);
    ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
    EXPECT_EQ(run_stats(run.get()).attempts, t->tasks.size());
    EXPECT_EQ(t->record->wrong_input.load(), 0);
    size_t fetched = 0;
    for (size_t i = 0; i < t->tasks.size(); ++i) {
      uint64_t size = 0;
      const gf_status s = gf_run_fetch(&size, run.get(), t->outputs[i], nullptr, 0);
      if (!t->kept[i] && t->outputs[i].id != t->root.id) {
        ASSERT_EQ(s, GF_ERR_STATE) << "task " << i << "'s output was not kept, yet is readable";
        continue;
      }
      ASSERT_EQ(s, GF_OK) << "task " << i << ": " << last_error();
      ASSERT_EQ(fetch_total(run.get(), t->outputs[i]), t->expected[i]) << "task " << i;
      ++fetched;
    }
    EXPECT_GT(fetched, t->tasks.size() / keep_every - 1);
  }
  expect_ledger_idle(pool.get());
}

TEST(JoinContinuation, FailedSumFailsExactlyItsAncestors) {
  Pool pool = make_pool(host_config(2, -1));
  constexpr uint32_t kLeaves = 256;  // sums 0..127 add leaves, 128..191 those, and so on
  warm_up(pool.get(), kLeaves);
  constexpr int64_t kFailAt = 5;
  auto t = make_tree(kLeaves, kFailAt);
  RunPtr run(submit(pool.get(), t->graph.get()));
  ASSERT_NE(run, nullptr);
  EXPECT_NE(gf_run_wait(run.get(), kWaitMs), GF_OK);
  EXPECT_EQ(run_state(run.get()), GF_RUN_FAILED);
  // The failed sum's ancestors: one per level above it (sum 5 -> 128 + 2 -> 192 + 1 -> ...).
  std::set<size_t> ancestors;
  size_t index = kFailAt, level_start = 0, width = kLeaves / 2;
  while (width > 1) {
    index = level_start + width + (index - level_start) / 2;
    level_start += width;
    width /= 2;
    ancestors.insert(t->first_sum + index);
  }
  const size_t failed = t->first_sum + kFailAt;
  EXPECT_EQ(task_state(run.get(), t->tasks[failed]), GF_TASK_FAILED);
  for (size_t i = 0; i < t->tasks.size(); ++i) {
    if (i == failed) continue;
    if (ancestors.count(i)) {
      EXPECT_EQ(t->record->ran[i].load(), 0) << "task " << i;
      EXPECT_EQ(task_state(run.get(), t->tasks[i]), GF_TASK_FAILED) << "task " << i;
      EXPECT_NE(task_error(run.get(), t->tasks[i]).find("its dependency"), std::string::npos);
    } else {
      EXPECT_EQ(t->record->ran[i].load(), 1) << "task " << i;
      EXPECT_EQ(task_state(run.get(), t->tasks[i]), GF_TASK_SUCCEEDED) << "task " << i;
    }
  }
  EXPECT_EQ(ancestors.size(), 7u);  // 128 sums at the first level: 7 levels above
  EXPECT_EQ(t->record->out_of_order.load(), 0);
  expect_ledger_idle(pool.get());
}

TEST(JoinContinuation, RetriedSumsParentRunsOnceAfterTheRetry) {
  Pool pool = make_pool(host_config(2, -1));
  constexpr uint32_t kLeaves = 1024;
  warm_up(pool.get(), kLeaves);
  for (int64_t retry_at : {0, 77, 600}) {
    auto t = make_tree(kLeaves, -1, retry_at);
    RunPtr run(submit(pool.get(), t->graph.get()));
    ASSERT_NE(run, nullptr);
    ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
    EXPECT_EQ(fetch_total(run.get(), t->root), expected_total(kLeaves));
    EXPECT_EQ(t->record->out_of_order.load(), 0);
    const gf_run_stats st = run_stats(run.get());
    EXPECT_EQ(st.attempts, t->tasks.size() + 1);
    for (size_t i = 0; i < t->tasks.size(); ++i) {
      const bool retried = i == t->first_sum + static_cast<size_t>(retry_at);
      EXPECT_EQ(t->record->ran[i].load(), retried ? 2 : 1) << "task " << i;
    }
  }
  expect_ledger_idle(pool.get());
}

// Successors not known to be tiny are placed, not run by the thread that made them ready: a root
// fanning out to long tasks keeps both workers busy.
TEST(JoinContinuation, FanOutOfLongTasksSpreadsOverWorkers) {
  Pool pool = make_pool(host_config(2, -1));
  Graph graph = make_graph();
  TaskSpec root_spec;
  root_spec.cost_key = "root";
  root_spec.cpu = [](gf_task_ctx *) { return 0; };
  const gf_task root = must_add_task(graph.get(), root_spec);
  auto workers = std::make_shared<std::vector<std::atomic<int>>>(8);
  for (int i = 0; i < 4; ++i) {
    TaskSpec spec;
    spec.cost_key = "long";
    spec.after = {root};
    spec.cpu = [workers](gf_task_ctx *ctx) {
      (*workers)[task_env(ctx).worker % 8].fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
      return 0;
    };
    must_add_task(graph.get(), spec);
  }
  RunPtr run(submit(pool.get(), graph.get()));
  ASSERT_NE(run, nullptr);
  ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
  int used = 0;
  for (auto &w : *workers) used += w.load() > 0 ? 1 : 0;
  EXPECT_EQ(used, 2);
}

// Joins of every shape a graph allows, run directly on many threads: producers with two outputs,
// a join reading both outputs of one producer, one reading the same data twice, joins of three
// inputs from different producers, and joins of joins. Every input a body reads holds what its
// producer wrote (the buffers published for other threads' joins are each output's own), and
// every task runs once.
TEST(JoinContinuation, JoinsOfEveryShapeReadEachInputRight) {
  Pool pool = make_pool(host_config(6, -1));
  struct Counts {
    std::atomic<int> wrong{0}, ran{0};
  };
  auto counts = std::make_shared<Counts>();
  // A body writing `made` into its outputs after checking that its inputs hold `expected`.
  auto body = [counts](std::vector<int64_t> expected, std::vector<int64_t> made) {
    return [counts, expected, made](gf_task_ctx *ctx) {
      counts->ran.fetch_add(1);
      for (uint32_t k = 0; k < expected.size(); ++k) {
        const void *p = nullptr;
        uint64_t size = 0;
        int64_t v = -1;
        if (gf_task_ctx_input(&p, &size, ctx, k) == GF_OK && size == sizeof v && p) {
          std::memcpy(&v, p, sizeof v);
        }
        if (v != expected[k]) counts->wrong.fetch_add(1);
      }
      for (uint32_t o = 0; o < made.size(); ++o) {
        void *p = nullptr;
        if (gf_task_ctx_output(&p, ctx, o, sizeof(int64_t)) != GF_OK) return 1;
        std::memcpy(p, &made[o], sizeof(int64_t));
      }
      return 0;
    };
  };
  std::mt19937 rng(4711);
  auto run_graph = [&] {
    Graph g = make_graph();
    std::vector<gf_data> data;
    std::vector<int64_t> value;  // what each data holds once made
    size_t tasks = 0;
    auto add = [&](const std::string &key, const std::vector<size_t> &inputs, int outputs) {
      TaskSpec spec;
      spec.cost_key = key;
      std::vector<int64_t> expected, made;
      for (size_t d : inputs) {
        spec.inputs.push_back(data[d]);
        expected.push_back(value[d]);
      }
      for (int o = 0; o < outputs; ++o) {
        spec.outputs.push_back(must_add_buffer(g.get(), nullptr, sizeof(int64_t)));
        data.push_back(spec.outputs.back());
        made.push_back(static_cast<int64_t>(value.size()) * 7 + 3);
        value.push_back(made.back());
      }
      spec.cpu = body(expected, made);
      must_add_task(g.get(), spec);
      ++tasks;
    };
    constexpr size_t kProducers = 600;
    for (size_t i = 0; i < kProducers; ++i) add("make-two", {}, 2);  // data 2i, 2i + 1
    const size_t first_join = data.size();
    for (size_t i = 0; i < kProducers; ++i) {
      const size_t p = rng() % kProducers, q = rng() % kProducers;
      switch (i % 4) {
        case 0:
          add("join", {2 * p, 2 * p + 1}, 1);
          break;  // both outputs of one task
        case 1:
          add("join", {2 * p + 1, 2 * p + 1}, 1);
          break;  // the same data twice
        case 2:
          add("join", {2 * p, 2 * q + 1, 2 * ((p + 1) % kProducers)}, 1);
          break;
        default:
          add("join", {2 * q, 2 * p + 1}, 1);
          break;
      }
    }
    const size_t joins = data.size() - first_join;
    for (size_t i = 0; i + 1 < joins; i += 2) {
      add("join", {first_join + i, first_join + i + 1, 2 * (rng() % kProducers)}, 1);
    }
    counts->ran = 0;
    RunPtr run(submit(pool.get(), g.get()));
    ASSERT_NE(run, nullptr);
    ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
    const gf_run_stats st = run_stats(run.get());
    EXPECT_EQ(st.succeeded, tasks);
    EXPECT_EQ(st.attempts, tasks);
    EXPECT_EQ(counts->ran.load(), static_cast<int>(tasks));
    EXPECT_EQ(counts->wrong.load(), 0);
  };
  for (int round = 0; round < 6; ++round) run_graph();  // the first teaches that joins are tiny
  expect_ledger_idle(pool.get());
}

}  // namespace
