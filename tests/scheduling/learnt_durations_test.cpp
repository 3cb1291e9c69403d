// learnt_durations_test.cpp: what tasks share learnt duration estimates by (gf_task_desc.cost_key)
// — kinds of work with different keys are placed by their own estimates; keys are checked; callers
// built before the field (two older gf_task_desc sizes) keep working.
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

using namespace gft;

namespace {

uint32_t worker_of(gf_run *run, gf_task t) {
  uint32_t w = UINT32_MAX;
  GF_EXPECT_OK(gf_run_task_worker(&w, run, t));
  return w;
}

Body sleeping(std::chrono::milliseconds d) {
  return [d](gf_task_ctx *) {
    std::this_thread::sleep_for(d);
    return 0;
  };
}

Body instant() {
  return [](gf_task_ctx *) { return 0; };
}

// Two kinds of work with the same C body functions (as every Python task has): "alpha" is slow
// on CPU workers and fast on GPU workers, "beta" the other way round; they are told apart only
// by their cost keys (given, or derived from their names). Once the pool has seen each kind
// finish on each kind of worker, a task with both bodies runs where its own kind is fast. With
// one estimate shared by both kinds, both would go to the same kind of worker (here: the GPU,
// whose mixed estimate is the lower), and beta would run slowly.
void expect_kinds_placed_apart(bool named_keys) {
  Pool pool = make_pool(host_config(1, 1));
  constexpr auto kSlow = std::chrono::milliseconds(100);
  auto spec = [&](bool alpha, bool cpu, bool gpu, int i) {
    TaskSpec s;
    if (cpu) s.cpu = alpha ? sleeping(kSlow) : instant();
    if (gpu) s.gpu = alpha ? instant() : sleeping(kSlow);
    const std::string kind = alpha ? "alpha" : "beta";
    if (named_keys) {
      s.name =
          alpha ? kind + "-" + std::to_string(i) : "('" + kind + "-x', " + std::to_string(i) + ")";
    } else {
      s.cost_key = kind;
    }
    return s;
  };
  auto run_one = [&](const TaskSpec &s) {
    Graph g = make_graph();
    gf_task t = must_add_task(g.get(), s);
    RunPtr run(submit(pool.get(), g.get()));
    EXPECT_EQ(gf_run_wait(run.get(), 20000), GF_OK) << last_error();
    return worker_of(run.get(), t);
  };
  uint32_t cpu_worker = UINT32_MAX, gpu_worker = UINT32_MAX;
  for (uint32_t w = 0; w < 2; ++w) {
    gf_worker_info info = GF_WORKER_INFO_INIT;
    GF_ASSERT_OK(gf_pool_worker_info(&info, pool.get(), w));
    (info.kind == GF_WORKER_CPU ? cpu_worker : gpu_worker) = w;
  }
  // Learning, in the order that makes a shared estimate favour the GPU for both kinds.
  EXPECT_EQ(run_one(spec(true, true, false, 0)), cpu_worker);   // alpha on CPU: slow
  EXPECT_EQ(run_one(spec(true, false, true, 1)), gpu_worker);   // alpha on GPU: fast
  EXPECT_EQ(run_one(spec(false, true, false, 2)), cpu_worker);  // beta on CPU: fast
  EXPECT_EQ(run_one(spec(false, false, true, 3)), gpu_worker);  // beta on GPU: slow

  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(run_one(spec(true, true, true, 10 + round)), gpu_worker)
        << "round " << round << ": alpha was not placed where it is fast";
    EXPECT_EQ(run_one(spec(false, true, true, 20 + round)), cpu_worker)
        << "round " << round << ": beta was not placed where it is fast";
  }
}

TEST(CostKeys, KindsWithDifferentKeysAreEstimatedApart) {
  expect_kinds_placed_apart(false);
}

TEST(CostKeys, NamePrefixesAreTheDefaultKeys) {
  expect_kinds_placed_apart(true);
}

// An idle GPU worker steals from a busy CPU worker only when running the task on the GPU would
// finish sooner than waiting: a task that takes 100 ms on GPUs and nothing on CPUs waits for the
// CPU worker that is busy with a task it expects to end at once (the race CI once lost, made
// deterministic here by a body that blocks).
TEST(CostKeys, IdleWorkersDoNotStealWhatIsSlowerForThem) {
  Pool pool = make_pool(host_config(1, 1));
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto run_alone = [&](TaskSpec s) {
    Graph g = make_graph();
    must_add_task(g.get(), s);
    RunPtr run(submit(pool.get(), g.get()));
    EXPECT_EQ(gf_run_wait(run.get(), 20000), GF_OK) << last_error();
  };
  TaskSpec quick_blocker;
  quick_blocker.cost_key = "blocker";
  quick_blocker.cpu = [release](gf_task_ctx *) {
    while (!release->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return 0;
  };
  TaskSpec beta;
  beta.cost_key = "beta";
  beta.cpu = instant();
  TaskSpec beta_on_gpu = beta;
  beta_on_gpu.cpu = nullptr;
  beta_on_gpu.gpu = sleeping(std::chrono::milliseconds(100));
  release->store(true);
  run_alone(quick_blocker);  // learnt: ends at once
  run_alone(beta);           // learnt: instant on CPUs
  run_alone(beta_on_gpu);    // learnt: 100 ms on GPUs
  release->store(false);

  Graph blocking = make_graph();
  must_add_task(blocking.get(), quick_blocker);
  RunPtr blocked(submit(pool.get(), blocking.get()));
  Graph g = make_graph();
  TaskSpec both = beta;
  both.gpu = sleeping(std::chrono::milliseconds(100));
  gf_task t = must_add_task(g.get(), both);
  RunPtr run(submit(pool.get(), g.get()));
  // The GPU worker is idle and woken for the queued task; stealing it would end it in ~100 ms.
  EXPECT_EQ(gf_run_wait(run.get(), 300), GF_TIMEOUT) << "the GPU worker took the task";
  release->store(true);
  EXPECT_EQ(gf_run_wait(run.get(), 20000), GF_OK) << last_error();
  EXPECT_EQ(gf_run_wait(blocked.get(), 20000), GF_OK) << last_error();
  gf_worker_info info = GF_WORKER_INFO_INIT;
  GF_ASSERT_OK(gf_pool_worker_info(&info, pool.get(), worker_of(run.get(), t)));
  EXPECT_EQ(info.kind, GF_WORKER_CPU);
}

TEST(CostKeys, BadKeysAreRejectedNamingTheTask) {
  Graph g = make_graph();
  const std::string too_long(4097, 'k');
  for (const char *key : {"", "tab\there", "\x01", "\xff\xfe", "\xc3", too_long.c_str()}) {
    gf_task_desc d = GF_TASK_DESC_INIT;
    d.name = "my-task";
    d.cpu_fn = [](gf_task_ctx *, void *) { return 0; };
    d.cost_key = key;
    gf_task out{0};
    std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&out, g.get(), &d));
    EXPECT_NE(m.find("task 'my-task' has cost_key"), std::string::npos) << m;
  }
  uint64_t count = 99;
  GF_EXPECT_OK(gf_graph_task_count(&count, g.get()));
  EXPECT_EQ(count, 0u) << "a task with a bad key was added";

  gf_task_desc d = GF_TASK_DESC_INIT;
  d.cpu_fn = [](gf_task_ctx *, void *) { return 0; };
  d.cost_key = "caf\xc3\xa9 (0) 'x' \xe2\x82\xac";  // UTF-8, spaces, punctuation
  gf_task out{0};
  GF_EXPECT_OK(gf_graph_add_task(&out, g.get(), &d));
  std::string key(4096, 'k');
  d.cost_key = key.c_str();
  GF_EXPECT_OK(gf_graph_add_task(&out, g.get(), &d));
}

// Callers built before `kernel` and `command`, or before `cost_key`, pass those sizes: what lies
// past them is not theirs and must not be read (here: garbage the library would reject).
TEST(CostKeys, OlderTaskDescSizesAreAccepted) {
  Pool pool = make_pool(host_config(1, -1));
  Graph g = make_graph();
  auto ran = std::make_shared<std::atomic<int>>(0);
  Bodies bodies{counting_body(ran), nullptr};
  const uint32_t sizes[] = {static_cast<uint32_t>(offsetof(gf_task_desc, kernel)),
                            static_cast<uint32_t>(offsetof(gf_task_desc, cost_key))};
  std::vector<gf_task> tasks;
  for (uint32_t size : sizes) {
    gf_task_desc d = GF_TASK_DESC_INIT;
    d.struct_size = size;
    d.name = size == sizes[0] ? "before-kernel" : "before-cost-key";
    d.cpu_fn = gft_call_cpu;
    d.user_data = &bodies;
    if (size == sizes[0]) d.kernel = "not a kernel name!";
    d.cost_key = "\x01 not a key";
    gf_task out{0};
    GF_ASSERT_OK(gf_graph_add_task(&out, g.get(), &d));
    tasks.push_back(out);
  }
  RunPtr run(submit(pool.get(), g.get()));
  GF_ASSERT_OK(gf_run_wait(run.get(), 20000));
  EXPECT_EQ(ran->load(), 2);
}

// gf_task_desc_init writes cost_key (NULL) only for callers whose struct has it.
TEST(CostKeys, InitFunctionSetsTheKeyToNull) {
  gf_task_desc d;
  std::memset(&d, 0xEE, sizeof d);
  gf_task_desc_init(&d, sizeof d);
  EXPECT_EQ(d.struct_size, sizeof d);
  EXPECT_EQ(d.cost_key, nullptr);
  std::memset(&d, 0xEE, sizeof d);
  gf_task_desc_init(&d, offsetof(gf_task_desc, cost_key));
  EXPECT_EQ(d.struct_size, offsetof(gf_task_desc, cost_key));
  EXPECT_EQ(d.command, nullptr);
  EXPECT_NE(d.cost_key, nullptr) << "wrote past the caller's struct";
}

}  // namespace
