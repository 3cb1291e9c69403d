// never_overcommitted_test.cpp: resources are never over-committed. Task bodies record, per worker
// and per resource, what the tasks running there hold, and compare with the capacity the pool's
// ledger advertises; fractional amounts share a device, whole ones never do.
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "test_support.hpp"

using namespace gft;

namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr int kMaxWorkers = 8;
const char *const kResources[] = {"cpu", "GPU", "gpu_memory", "bigmem"};
constexpr int kResourceCount = 4;

int64_t fixed(double amount) {
  return static_cast<int64_t>(std::llround(amount * 10000.0));
}

// What every body of the random graphs reports into.
struct Tracker {
  const gf_pool *pool = nullptr;
  uint32_t workers = 0;
  std::array<gf_worker_kind, kMaxWorkers> kind{};
  int64_t capacity[kMaxWorkers][kResourceCount];  // fixed point; -1: not advertised
  std::atomic<int64_t> in_use[kMaxWorkers][kResourceCount]{};
  std::atomic<int64_t> peak[kMaxWorkers][kResourceCount]{};
  std::atomic<int> bodies{0};
  std::atomic<int> violations{0};
  std::mutex mu;
  std::vector<std::string> problems;

  void problem(const std::string &p) {
    violations.fetch_add(1);
    std::lock_guard<std::mutex> lock(mu);
    if (problems.size() < 20) problems.push_back(p);
  }
};

struct Request {
  int resource;  // index into kResources
  double amount;
};

struct TaskPlan {
  std::string name;
  bool cpu = false, gpu = false;
  std::vector<Request> requests;
  std::vector<size_t> after;       // earlier tasks
  std::vector<size_t> input_from;  // earlier tasks whose output this one reads
  bool has_output = false;
};

constexpr uint64_t kOutputSize = 4096;

// The body shared by both kinds: checks placement, accounts the requests, checks the inputs.
int tracked_body(gf_task_ctx *ctx, Tracker *tr, const TaskPlan *plan, size_t index,
                 gf_worker_kind expected_kind) {
  tr->bodies.fetch_add(1);
  const gf_task_env env = task_env(ctx);
  const uint32_t w = env.worker;
  if (w >= tr->workers) {
    tr->problem(plan->name + ": worker index out of range");
    return 1;
  }
  if (env.kind != expected_kind || tr->kind[w] != expected_kind)
    tr->problem(plan->name + ": body ran on the wrong kind of worker");
  if ((expected_kind == GF_WORKER_CPU) != (env.device == -1))
    tr->problem(plan->name + ": device ordinal does not match the kind");

  for (const Request &r : plan->requests) {
    const int64_t cap = tr->capacity[w][r.resource];
    const int64_t amount = fixed(r.amount);
    if (cap < 0) {
      tr->problem(plan->name + ": placed on worker " + std::to_string(w) + " without " +
                  kResources[r.resource]);
      continue;
    }
    const int64_t now = tr->in_use[w][r.resource].fetch_add(amount) + amount;
    int64_t prev = tr->peak[w][r.resource].load();
    while (now > prev && !tr->peak[w][r.resource].compare_exchange_weak(prev, now)) {
    }
    if (now > cap)
      tr->problem(plan->name + ": " + kResources[r.resource] + " over-committed on worker " +
                  std::to_string(w) + ": " + std::to_string(now) + " > " + std::to_string(cap));
    // The pool's own ledger must account at least what this task holds, within capacity.
    gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
    if (gf_pool_ledger_lookup(&e, tr->pool, w, kResources[r.resource]) != GF_OK) {
      tr->problem(plan->name + ": ledger lookup failed: " + last_error());
    } else {
      if (fixed(e.in_use) < amount)
        tr->problem(plan->name + ": ledger in_use of " + kResources[r.resource] + " (" +
                    std::to_string(e.in_use) + ") below the running task's request");
      if (e.in_use > e.capacity || e.peak_in_use > e.capacity)
        tr->problem(plan->name + ": ledger reports " + kResources[r.resource] + " over capacity");
    }
  }

  for (uint32_t i = 0; i < plan->input_from.size(); ++i) {
    const void *p = nullptr;
    uint64_t size = 0;
    if (gf_task_ctx_input(&p, &size, ctx, i) != GF_OK || size != kOutputSize ||
        !check_pattern(static_cast<const unsigned char *>(p), size, plan->input_from[i]))
      tr->problem(plan->name + ": input " + std::to_string(i) + " has wrong contents");
  }
  if (plan->has_output) {
    void *p = nullptr;
    if (gf_task_ctx_output(&p, ctx, 0, kOutputSize) != GF_OK || p == nullptr) {
      tr->problem(plan->name + ": output allocation failed: " + last_error());
    } else {
      auto *bytes = static_cast<unsigned char *>(p);
      for (uint64_t i = 0; i < kOutputSize; ++i) bytes[i] = pattern_byte(index, i);
    }
  }

  std::this_thread::sleep_for(std::chrono::microseconds(50 + (index % 4) * 50));

  for (const Request &r : plan->requests)
    if (tr->capacity[w][r.resource] >= 0) tr->in_use[w][r.resource].fetch_sub(fixed(r.amount));
  return 0;
}

std::vector<TaskPlan> random_plan(std::mt19937 &rng, size_t tasks, int graph_index) {
  auto pick = [&](std::initializer_list<double> xs) {
    std::uniform_int_distribution<size_t> d(0, xs.size() - 1);
    return *(xs.begin() + d(rng));
  };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  std::vector<TaskPlan> plan(tasks);
  for (size_t i = 0; i < tasks; ++i) {
    TaskPlan &t = plan[i];
    t.name = "g" + std::to_string(graph_index) + "_t" + std::to_string(i);
    switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
      case 0:
        t.cpu = true;
        if (chance(0.5)) t.requests.push_back({0, 1.0});
        if (chance(0.3)) t.requests.push_back({3, pick({0.5, 1.0, 1.5, 2.0})});
        break;
      case 1:
        t.gpu = true;
        if (chance(0.7)) t.requests.push_back({1, pick({0.25, 0.5, 1.0})});
        if (chance(0.5))
          t.requests.push_back({2, static_cast<double>(MiB) * pick({1.0, 16.0, 64.0, 128.0})});
        if (chance(0.3)) t.requests.push_back({3, pick({0.5, 1.0})});
        break;
      default:
        t.cpu = t.gpu = true;
        if (chance(0.3)) t.requests.push_back({3, pick({0.25, 0.5, 1.0})});
        break;
    }
    if (i > 0) {
      std::uniform_int_distribution<size_t> earlier(0, i - 1);
      if (chance(0.3)) t.after.push_back(earlier(rng));
      if (chance(0.2)) t.after.push_back(earlier(rng));
      if (chance(0.3)) {
        const size_t from = earlier(rng);
        if (plan[from].has_output || chance(0.5)) {
          plan[from].has_output = true;
          t.input_from.push_back(from);
        }
      }
    }
    if (chance(0.2)) t.has_output = true;
  }
  return plan;
}

// Builds a graph from a plan; plan and tracker must outlive the runs.
Graph build(const std::vector<TaskPlan> &plan, Tracker *tr) {
  Graph g = make_graph();
  std::vector<gf_task> tasks(plan.size());
  std::vector<gf_data> outputs(plan.size(), gf_data{0});
  for (size_t i = 0; i < plan.size(); ++i)
    if (plan[i].has_output) outputs[i] = must_add_buffer(g.get(), nullptr, kOutputSize);
  for (size_t i = 0; i < plan.size(); ++i) {
    const TaskPlan *p = &plan[i];
    TaskSpec s;
    s.name = p->name;
    if (p->cpu)
      s.cpu = [tr, p, i](gf_task_ctx *ctx) { return tracked_body(ctx, tr, p, i, GF_WORKER_CPU); };
    if (p->gpu)
      s.gpu = [tr, p, i](gf_task_ctx *ctx) { return tracked_body(ctx, tr, p, i, GF_WORKER_GPU); };
    for (const Request &r : p->requests) s.resources.push_back({kResources[r.resource], r.amount});
    for (size_t a : p->after) s.after.push_back(tasks[a]);
    for (size_t from : p->input_from) s.inputs.push_back(outputs[from]);
    if (p->has_output) s.outputs.push_back(outputs[i]);
    tasks[i] = must_add_task(g.get(), s);
  }
  return g;
}

TEST(Ledger, NeverOverCommittedAcrossRandomGraphs) {
  const gf_resource cpu_labels[] = {{"bigmem", 2.0}};
  const gf_resource gpu_labels[] = {{"bigmem", 1.0}};
  gf_pool_config c = host_config(3, 2, 256 * MiB, 1e10, 3);
  c.cpu_worker_labels = cpu_labels;
  c.cpu_worker_label_count = 1;
  c.gpu_worker_labels = gpu_labels;
  c.gpu_worker_label_count = 1;
  Pool pool = make_pool(c);
  ASSERT_NE(pool, nullptr);

  auto tr = std::make_unique<Tracker>();
  tr->pool = pool.get();
  tr->workers = worker_count(pool.get());
  ASSERT_EQ(tr->workers, 5u);
  int cpus = 0, gpus = 0;
  for (uint32_t w = 0; w < tr->workers; ++w) {
    const gf_worker_info info = worker_info(pool.get(), w);
    tr->kind[w] = info.kind;
    (info.kind == GF_WORKER_CPU ? cpus : gpus)++;
    for (int r = 0; r < kResourceCount; ++r) {
      const gf_ledger_entry e = ledger(pool.get(), w, kResources[r]);
      tr->capacity[w][r] = e.capacity < 0 ? -1 : fixed(e.capacity);
    }
    // What the config promises each kind advertises.
    if (info.kind == GF_WORKER_CPU) {
      EXPECT_EQ(info.device, -1);
      EXPECT_EQ(tr->capacity[w][0], fixed(1.0)) << "cpu on worker " << w;
      EXPECT_EQ(tr->capacity[w][3], fixed(2.0)) << "bigmem on worker " << w;
      EXPECT_EQ(tr->capacity[w][1], -1) << "a CPU worker advertises GPU";
    } else {
      EXPECT_GE(info.device, 0);
      EXPECT_EQ(info.emulated, 1u);
      EXPECT_EQ(info.threads, 3u);
      EXPECT_EQ(tr->capacity[w][1], fixed(1.0)) << "GPU on worker " << w;
      EXPECT_EQ(tr->capacity[w][2], fixed(static_cast<double>(256 * MiB))) << "gpu_memory";
      EXPECT_EQ(tr->capacity[w][3], fixed(1.0)) << "bigmem on worker " << w;
    }
  }
  EXPECT_EQ(cpus, 3);
  EXPECT_EQ(gpus, 2);

  std::mt19937 rng(20240611u);
  constexpr int kGraphs = 20;
  constexpr int kBatch = 4;  // graphs in flight at once, sharing the ledgers
  int expected_bodies = 0;
  for (int first = 0; first < kGraphs; first += kBatch) {
    std::vector<std::vector<TaskPlan>> plans;
    std::vector<Graph> graphs;
    std::vector<RunPtr> runs;
    for (int i = first; i < first + kBatch; ++i) {
      const size_t n = std::uniform_int_distribution<size_t>(50, 200)(rng);
      plans.push_back(random_plan(rng, n, i));
      expected_bodies += static_cast<int>(n);
    }
    for (auto &p : plans) graphs.push_back(build(p, tr.get()));
    for (auto &g : graphs) {
      runs.emplace_back(submit(pool.get(), g.get()));
      ASSERT_NE(runs.back(), nullptr);
    }
    for (auto &r : runs) {
      const gf_status s = gf_run_wait(r.get(), kWaitMs);
      EXPECT_EQ(s, GF_OK) << describe(s);
    }
    runs.clear();
  }
  EXPECT_EQ(tr->bodies.load(), expected_bodies);
  EXPECT_EQ(tr->violations.load(), 0);
  for (const auto &p : tr->problems) ADD_FAILURE() << p;
  for (uint32_t w = 0; w < tr->workers; ++w)
    for (int r = 0; r < kResourceCount; ++r) {
      EXPECT_EQ(tr->in_use[w][r].load(), 0);
      if (tr->capacity[w][r] >= 0) {
        EXPECT_LE(tr->peak[w][r].load(), tr->capacity[w][r]);
      }
    }
  expect_ledger_idle(pool.get());
}

// --- Sharing one device ----------------------------------------------------------------------

struct Overlap {
  std::atomic<int> active{0};
  std::atomic<int> max_active{0};
  std::atomic<int64_t> held{0};  // fixed point sum of the running tasks' amounts
  std::atomic<int64_t> max_held{0};
  std::atomic<int> rendezvous_ok{0};
};

struct OverlapResult {
  int met = -1;          // bodies that saw all the others running at the same time
  int max_active = -1;   // most bodies running at once
  double max_held = -1;  // most of the resource held at once
};

void raise_to(std::atomic<int64_t> &peak, int64_t now) {
  int64_t prev = peak.load();
  while (now > prev && !peak.compare_exchange_weak(prev, now)) {
  }
}

// Runs `amounts.size()` independent GPU tasks, each asking `resource`=amount, on a pool with one
// device and `threads` GPU threads. Each body waits (bounded by `wait`) for all the others to be
// running at the same time.
OverlapResult run_concurrent(const std::vector<double> &amounts, const char *resource,
                             uint32_t threads, std::chrono::milliseconds wait,
                             const gf_pool_config *config = nullptr) {
  gf_pool_config c = config ? *config : host_config(1, 1, 64 * MiB, 1e10, threads);
  Pool pool = make_pool(c);
  auto ov = std::make_shared<Overlap>();
  const int n = static_cast<int>(amounts.size());
  Graph g = make_graph();
  for (size_t i = 0; i < amounts.size(); ++i) {
    TaskSpec s;
    s.name = "share" + std::to_string(i);
    s.resources = {{resource, amounts[i]}};
    const int64_t amount = fixed(amounts[i]);
    s.gpu = [ov, n, wait, amount](gf_task_ctx *) {
      raise_to(ov->max_held, ov->held.fetch_add(amount) + amount);
      const int now = ov->active.fetch_add(1) + 1;
      int prev = ov->max_active.load();
      while (now > prev && !ov->max_active.compare_exchange_weak(prev, now)) {
      }
      if (wait_until([&] { return ov->max_active.load() >= n; }, wait))
        ov->rendezvous_ok.fetch_add(1);
      ov->active.fetch_sub(1);
      ov->held.fetch_sub(amount);
      return 0;
    };
    must_add_task(g.get(), s);
  }
  OverlapResult res;
  RunPtr run(submit(pool.get(), g.get()));
  if (!run) return res;
  const gf_status s = gf_run_wait(run.get(), kWaitMs);
  EXPECT_EQ(s, GF_OK) << describe(s);
  run.reset();
  expect_ledger_idle(pool.get());
  res.met = ov->rendezvous_ok.load();
  res.max_active = ov->max_active.load();
  res.max_held = static_cast<double>(ov->max_held.load()) / 10000.0;
  return res;
}

TEST(Ledger, HalfGpuTasksShareADevice) {
  const OverlapResult r = run_concurrent({0.5, 0.5}, "GPU", 2, 10000ms);
  EXPECT_EQ(r.met, 2) << "two GPU=0.5 tasks never ran at the same time on a 2-thread device";
  EXPECT_EQ(r.max_active, 2);
  EXPECT_LE(r.max_held, 1.0);
}

TEST(Ledger, FractionsAddUpExactly) {
  // In binary floating point 0.05 + 0.15 + 0.8 exceeds 1 in every order; in the ledger's fixed
  // point it is exactly 1, so the three fit on one device together.
  const OverlapResult r = run_concurrent({0.05, 0.15, 0.8}, "GPU", 3, 10000ms);
  EXPECT_EQ(r.met, 3) << "fractions summing to exactly 1 did not share the device";
  EXPECT_LE(r.max_held, 1.0);
}

TEST(Ledger, WholeGpuTasksNeverOverlap) {
  const OverlapResult r = run_concurrent({1.0, 1.0, 1.0, 1.0}, "GPU", 2, 100ms);
  EXPECT_EQ(r.met, 0);
  EXPECT_EQ(r.max_active, 1) << "two GPU=1 tasks ran at once on one device";
}

TEST(Ledger, OverlappingGpuFractionsNeverExceedOne) {
  const OverlapResult r = run_concurrent({0.75, 0.5, 0.75, 0.5}, "GPU", 3, 100ms);
  EXPECT_EQ(r.met, 0);
  EXPECT_GE(r.max_active, 1);
  EXPECT_LE(r.max_held, 1.0) << "GPU over-committed";
}

TEST(Ledger, GpuMemoryReservationsNeverExceedTheDevice) {
  const double big = static_cast<double>(40 * MiB);  // two of them exceed the 64 MiB device
  const OverlapResult r = run_concurrent({big, big, big}, "gpu_memory", 2, 100ms);
  EXPECT_EQ(r.met, 0);
  EXPECT_EQ(r.max_active, 1) << "gpu_memory reservations over-committed the device";
}

TEST(Ledger, UserLabelCapacityIsRespected) {
  const gf_resource labels[] = {{"bigmem", 1.0}};
  gf_pool_config c = host_config(1, 1, 64 * MiB, 1e10, 3);
  c.gpu_worker_labels = labels;
  c.gpu_worker_label_count = 1;
  {
    const OverlapResult r = run_concurrent({0.5, 0.5}, "bigmem", 3, 10000ms, &c);
    EXPECT_EQ(r.met, 2) << "bigmem=0.5 twice fits a bigmem=1 worker";
  }
  {
    const OverlapResult r = run_concurrent({0.6, 0.6, 0.6}, "bigmem", 3, 100ms, &c);
    EXPECT_EQ(r.max_active, 1) << "bigmem over-committed";
  }
}

}  // namespace
