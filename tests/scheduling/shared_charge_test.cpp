// shared_charge_test.cpp: tasks that hold resources, batched on a CPU worker's thread, are each
// charged exactly their request while they run, one at a time, and nothing stays charged after;
// tasks that alternate requests are each charged their own.
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "test_support.hpp"

using namespace gft;

namespace {

struct Seen {
  std::mutex mu;
  std::vector<std::string> problems;
  std::atomic<int> bodies{0};
  void problem(std::string p) {
    std::lock_guard<std::mutex> lock(mu);
    if (problems.size() < 10) problems.push_back(std::move(p));
  }
};

double in_use(const gf_pool *pool, uint32_t worker, const char *resource) {
  gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
  if (gf_pool_ledger_lookup(&e, pool, worker, resource) != GF_OK) return -1;
  return e.in_use;
}

// A body that checks the ledger of its worker holds exactly `cpu` and `bigmem` while it runs.
Body charged_exactly(const gf_pool *pool, std::shared_ptr<Seen> seen, double bigmem,
                     std::string name) {
  return [=](gf_task_ctx *ctx) {
    seen->bodies.fetch_add(1);
    const uint32_t w = task_env(ctx).worker;
    const double cpu_now = in_use(pool, w, "cpu"), bigmem_now = in_use(pool, w, "bigmem");
    if (std::abs(cpu_now - 1.0) > 1e-9 || std::abs(bigmem_now - bigmem) > 1e-9) {
      seen->problem(name + " ran with cpu=" + std::to_string(cpu_now) +
                    " bigmem=" + std::to_string(bigmem_now) +
                    " charged; it asked for cpu=1 bigmem=" + std::to_string(bigmem));
    }
    return 0;
  };
}

gf_pool_config one_labelled_cpu_worker(const gf_resource *label) {
  gf_pool_config c = host_config(1, 0);
  c.cpu_worker_labels = label;
  c.cpu_worker_label_count = 1;
  return c;
}

TEST(SharedCharge, TasksOfOneRequestInOneBatchAreChargedOneAtATime) {
  const gf_resource label{"bigmem", 1.0};
  Pool pool = make_pool(one_labelled_cpu_worker(&label));
  auto seen = std::make_shared<Seen>();
  constexpr int kTasks = 400;  // tiny roots of one request: queued as spans, picked in batches
  for (int round = 0; round < 2; ++round) {  // the second run knows the tasks are tiny
    Graph g = make_graph();
    for (int i = 0; i < kTasks; ++i) {
      TaskSpec s;
      s.cpu = charged_exactly(pool.get(), seen, 0.25, "task " + std::to_string(i));
      s.resources = {{"cpu", 1}, {"bigmem", 0.25}};
      must_add_task(g.get(), s);
    }
    RunPtr run(submit(pool.get(), g.get()));
    ASSERT_TRUE(run);
    ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
  }
  EXPECT_EQ(seen->bodies.load(), 2 * kTasks);
  for (const std::string &p : seen->problems) ADD_FAILURE() << p;
  EXPECT_EQ(in_use(pool.get(), 0, "cpu"), 0.0);
  EXPECT_EQ(in_use(pool.get(), 0, "bigmem"), 0.0);
  gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
  ASSERT_EQ(gf_pool_ledger_lookup(&e, pool.get(), 0, "bigmem"), GF_OK);
  EXPECT_DOUBLE_EQ(e.peak_in_use, 0.25) << "more than one task's charge was held at once";
}

TEST(SharedCharge, TasksThatAlternateRequestsAreEachChargedTheirOwn) {
  const gf_resource label{"bigmem", 1.0};
  Pool pool = make_pool(one_labelled_cpu_worker(&label));
  auto seen = std::make_shared<Seen>();
  Graph g = make_graph();
  constexpr int kTasks = 120;
  for (int i = 0; i < kTasks; ++i) {
    // The same names in another order is the same request; another amount is not.
    const double bigmem = i % 3 == 2 ? 0.5 : 0.25;
    TaskSpec s;
    s.cpu = charged_exactly(pool.get(), seen, bigmem, "task " + std::to_string(i));
    if (i % 3 == 1) {
      s.resources = {{"bigmem", bigmem}, {"cpu", 1}};
    } else {
      s.resources = {{"cpu", 1}, {"bigmem", bigmem}};
    }
    must_add_task(g.get(), s);
  }
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_TRUE(run);
  ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
  EXPECT_EQ(seen->bodies.load(), kTasks);
  for (const std::string &p : seen->problems) ADD_FAILURE() << p;
  EXPECT_EQ(in_use(pool.get(), 0, "bigmem"), 0.0);
}

// A chain's links run one after another on the thread that ran the link before, under the charge
// of its batch's first link: each still sees exactly its own request charged, in order.
TEST(SharedCharge, AChainOfOneRequestRunsUnderItsBatchsCharge) {
  const gf_resource label{"bigmem", 1.0};
  Pool pool = make_pool(one_labelled_cpu_worker(&label));
  auto seen = std::make_shared<Seen>();
  auto order = std::make_shared<std::vector<int>>();
  Graph g = make_graph();
  constexpr int kLinks = 500;
  gf_task previous{};
  for (int i = 0; i < kLinks; ++i) {
    TaskSpec s;
    Body check = charged_exactly(pool.get(), seen, 0.25, "link " + std::to_string(i));
    s.cpu = [check, order, i](gf_task_ctx *ctx) {
      order->push_back(i);  // one link at a time: no lock needed
      return check(ctx);
    };
    s.resources = {{"cpu", 1}, {"bigmem", 0.25}};
    if (i > 0) s.after = {previous};
    previous = must_add_task(g.get(), s);
  }
  for (int round = 0; round < 2; ++round) {  // the second run knows the links are tiny
    order->clear();
    RunPtr run(submit(pool.get(), g.get()));
    ASSERT_TRUE(run);
    ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
    ASSERT_EQ(order->size(), static_cast<size_t>(kLinks));
    for (int i = 0; i < kLinks; ++i) ASSERT_EQ((*order)[i], i) << "links ran out of order";
  }
  for (const std::string &p : seen->problems) ADD_FAILURE() << p;
  EXPECT_EQ(in_use(pool.get(), 0, "cpu"), 0.0);
  EXPECT_EQ(in_use(pool.get(), 0, "bigmem"), 0.0);
}

// Two workers share the label between them; each task still sees its own charge on the worker
// it ran on, and every task runs once.
TEST(SharedCharge, TwoWorkersEachChargeTheirOwnBatches) {
  const gf_resource label{"bigmem", 1.0};
  gf_pool_config c = host_config(2, 0);
  c.cpu_worker_labels = &label;
  c.cpu_worker_label_count = 1;
  Pool pool = make_pool(c);
  auto seen = std::make_shared<Seen>();
  Graph g = make_graph();
  constexpr int kTasks = 1000;
  for (int i = 0; i < kTasks; ++i) {
    TaskSpec s;
    s.cpu = charged_exactly(pool.get(), seen, 0.25, "task " + std::to_string(i));
    s.resources = {{"cpu", 1}, {"bigmem", 0.25}};
    must_add_task(g.get(), s);
  }
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_TRUE(run);
  ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
  EXPECT_EQ(seen->bodies.load(), kTasks);
  for (const std::string &p : seen->problems) ADD_FAILURE() << p;
  for (uint32_t w = 0; w < 2; ++w) EXPECT_EQ(in_use(pool.get(), w, "bigmem"), 0.0);
}

}  // namespace
