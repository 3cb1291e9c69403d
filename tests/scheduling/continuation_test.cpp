// continuation_test.cpp: a worker that runs a finished task's only successor directly, without
// the scheduler's mutex (issue 29, item 2). What a user relies on stays true: a task runs at most
// once and only after what it depends on; a task whose body ran is reported succeeded, even when
// its run is cancelled or its pool shut down meanwhile, and one that did not is cancelled; a
// failed link stops its chain; a retried link's successor runs once, after the retry. Sized for
// the TSan build, where races between the worker's claim and a cancel show.
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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

constexpr int kWaitMs = 60000;

// Body invocations per task, bodies that returned success, and tasks that started before their
// predecessor had succeeded.
struct Record {
  explicit Record(size_t tasks) : ran(tasks), succeeded(tasks) {}
  std::vector<std::atomic<int>> ran;
  std::vector<std::atomic<int>> succeeded;
  std::atomic<int> out_of_order{0};
};

// `chains` chains of `links` plain tasks (no data, no resources: the path that runs successors
// directly); every 50th link also starts a short branch, so that it has two successors and
// publishes them instead. fail_at / retry_at: a link index whose body fails (every attempt, or
// only the first).
struct Chains {
  Graph graph;
  std::vector<gf_task> tasks;
  std::shared_ptr<Record> record;
};

Chains make_chains(uint32_t chains, uint32_t links, int64_t fail_at = -1, int64_t retry_at = -1) {
  Chains c{make_graph(), {}, nullptr};
  const uint32_t per_chain = links + (links / 50) * 3;
  c.record = std::make_shared<Record>(size_t{chains} * per_chain);
  auto add = [&](int64_t pred, bool fails, bool fails_once) {
    const auto index = static_cast<uint32_t>(c.tasks.size());
    TaskSpec spec;
    spec.cost_key = "link";
    spec.retries = fails_once ? 1 : 0;
    spec.cpu = [rec = c.record, index, pred, fails, fails_once](gf_task_ctx *) {
      const int before = rec->ran[index].fetch_add(1);
      if (pred >= 0 && rec->succeeded[static_cast<size_t>(pred)].load() == 0) {
        rec->out_of_order.fetch_add(1);
      }
      if (fails || (fails_once && before == 0)) return 1;
      rec->succeeded[index].store(1);
      return 0;
    };
    if (pred >= 0) spec.after = {c.tasks[static_cast<size_t>(pred)]};
    c.tasks.push_back(must_add_task(c.graph.get(), spec));
    return static_cast<int64_t>(index);
  };
  for (uint32_t ch = 0; ch < chains; ++ch) {
    int64_t prev = -1;
    for (uint32_t link = 0; link < links; ++link) {
      prev = add(prev, link == fail_at, link == retry_at);
      if (link % 50 == 49) {
        int64_t branch = prev;
        for (int k = 0; k < 3; ++k) branch = add(branch, false, false);
      }
    }
  }
  return c;
}

// Whatever ran succeeded, once and in order; whatever did not is cancelled, never lost.
void expect_ran_means_succeeded(gf_run *run, const Chains &c) {
  const gf_run_stats st = run_stats(run);
  EXPECT_EQ(st.succeeded + st.cancelled, c.tasks.size());
  EXPECT_EQ(st.failed, 0u);
  EXPECT_EQ(c.record->out_of_order.load(), 0);
  uint64_t ran = 0;
  for (size_t t = 0; t < c.tasks.size(); ++t) {
    const int n = c.record->ran[t].load();
    EXPECT_LE(n, 1) << "task " << t;
    ran += static_cast<uint64_t>(n);
    EXPECT_EQ(task_state(run, c.tasks[t]), n ? GF_TASK_SUCCEEDED : GF_TASK_CANCELLED)
        << "task " << t;
  }
  EXPECT_EQ(ran, st.succeeded);
}

TEST(Continuation, ChainsCancelledMidFlight) {
  Pool pool = make_pool(host_config(4, -1));
  std::mt19937 rng(2911);
  for (int round = 0; round < 16; ++round) {
    Chains c = make_chains(6, 3000);
    RunPtr run(submit(pool.get(), c.graph.get()));
    ASSERT_NE(run, nullptr);
    const gf_status s =
        wait_cancelled_after(run.get(), std::chrono::microseconds(rng() % 3000), kWaitMs);
    ASSERT_TRUE(s == GF_OK || s == GF_ERR_CANCELLED) << describe(s);
    expect_ran_means_succeeded(run.get(), c);
  }
  expect_ledger_idle(pool.get());
}

TEST(Continuation, PoolShutDownWhileChainsRun) {
  for (int round = 0; round < 6; ++round) {
    Pool pool = make_pool(host_config(3, -1));
    Chains c = make_chains(4, 2000);
    RunPtr run(submit(pool.get(), c.graph.get()));
    ASSERT_NE(run, nullptr);
    std::this_thread::sleep_for(std::chrono::microseconds(200 * round));
    pool.reset();  // cancels what has not run; the run stays a valid handle
    const gf_status s = gf_run_wait(run.get(), kWaitMs);
    ASSERT_TRUE(s == GF_OK || s == GF_ERR_CANCELLED) << describe(s);
    expect_ran_means_succeeded(run.get(), c);
  }
}

TEST(Continuation, FailedLinkStopsItsChain) {
  Pool pool = make_pool(host_config(2, -1));
  constexpr uint32_t kLinks = 200, kFailAt = 120;
  Chains c = make_chains(1, kLinks, kFailAt);
  RunPtr run(submit(pool.get(), c.graph.get()));
  ASSERT_NE(run, nullptr);
  EXPECT_NE(gf_run_wait(run.get(), kWaitMs), GF_OK);
  EXPECT_EQ(run_state(run.get()), GF_RUN_FAILED);
  EXPECT_EQ(c.record->out_of_order.load(), 0);
  // Task indices: link k has index k + 3 * (k / 50) (a branch of 3 after every 50th link).
  const auto link = [](uint32_t k) { return k + 3 * (k / 50); };
  const size_t failed = link(kFailAt);
  EXPECT_EQ(c.record->ran[failed].load(), 1);
  EXPECT_EQ(task_state(run.get(), c.tasks[failed]), GF_TASK_FAILED);
  for (uint32_t k = kFailAt + 1; k < kLinks; ++k) {
    EXPECT_EQ(c.record->ran[link(k)].load(), 0) << "link " << k;
    EXPECT_EQ(task_state(run.get(), c.tasks[link(k)]), GF_TASK_FAILED) << "link " << k;
  }
  EXPECT_NE(task_error(run.get(), c.tasks[link(kFailAt + 1)]).find("its dependency"),
            std::string::npos);
  for (uint32_t k = 0; k < kFailAt; ++k) {
    EXPECT_EQ(c.record->ran[link(k)].load(), 1) << "link " << k;
    EXPECT_EQ(task_state(run.get(), c.tasks[link(k)]), GF_TASK_SUCCEEDED) << "link " << k;
  }
  expect_ledger_idle(pool.get());
}

TEST(Continuation, RetriedLinkRunsItsSuccessorOnceAfterTheRetry) {
  Pool pool = make_pool(host_config(2, -1));
  constexpr uint32_t kLinks = 300, kRetryAt = 77;
  Chains c = make_chains(2, kLinks, -1, kRetryAt);
  RunPtr run(submit(pool.get(), c.graph.get()));
  ASSERT_NE(run, nullptr);
  ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
  EXPECT_EQ(c.record->out_of_order.load(), 0);
  const gf_run_stats st = run_stats(run.get());
  EXPECT_EQ(st.succeeded, c.tasks.size());
  EXPECT_EQ(st.attempts, c.tasks.size() + 2);  // one retried link per chain
  const size_t per_chain = c.tasks.size() / 2;
  for (size_t t = 0; t < c.tasks.size(); ++t) {
    const bool retried = t % per_chain == kRetryAt + 3 * (kRetryAt / 50);
    EXPECT_EQ(c.record->ran[t].load(), retried ? 2 : 1) << "task " << t;
  }
  expect_ledger_idle(pool.get());
}

// A chain of links passing a value through 8-byte buffers; link `silent` returns success
// without setting its output on its first attempt (`retries` allows another).
struct SilentLinkChain {
  Graph graph = make_graph();
  std::vector<gf_task> tasks;
  gf_data last{};
  std::shared_ptr<std::vector<std::atomic<int>>> ran;
};

SilentLinkChain silent_link_chain(uint32_t links, uint32_t silent, uint32_t retries) {
  SilentLinkChain c;
  c.ran = std::make_shared<std::vector<std::atomic<int>>>(links);
  gf_data previous{};
  for (uint32_t i = 0; i < links; ++i) {
    TaskSpec spec;
    spec.cost_key = "value link";
    spec.retries = i == silent ? retries : 0;
    if (i > 0) spec.inputs = {previous};
    gf_data out = must_add_buffer(c.graph.get(), nullptr, 8, i + 1 == links ? GF_DATA_KEEP : 0);
    spec.outputs = {out};
    spec.cpu = [ran = c.ran, i, silent](gf_task_ctx *ctx) -> int {
      const int attempt = (*ran)[i].fetch_add(1);
      uint64_t value = i;
      if (i > 0) {
        const void *in = nullptr;
        uint64_t size = 0;
        if (gf_task_ctx_input(&in, &size, ctx, 0) != GF_OK) return 1;
        value = *static_cast<const uint64_t *>(in) + 1;
      }
      if (i == silent && attempt == 0) return 0;  // "success", with nothing made
      void *p = nullptr;
      if (gf_task_ctx_output(&p, ctx, 0, 8) != GF_OK) return 1;
      std::memcpy(p, &value, 8);
      return 0;
    };
    c.tasks.push_back(must_add_task(c.graph.get(), spec));
    previous = c.last = out;
  }
  return c;
}

TEST(Continuation, ALinkThatSucceedsWithoutItsOutputFailsAndItsSuccessorWaitsForTheRetry) {
  constexpr uint32_t kLinks = 200, kSilent = 77;
  Pool pool = make_pool(host_config(2, -1));
  {
    // Retried: the link's second attempt makes the value, and its successor runs once, after it.
    SilentLinkChain c = silent_link_chain(kLinks, kSilent, 1);
    RunPtr run(submit(pool.get(), c.graph.get()));
    ASSERT_NE(run, nullptr);
    ASSERT_EQ(gf_run_wait(run.get(), kWaitMs), GF_OK) << last_error();
    EXPECT_EQ((*c.ran)[kSilent].load(), 2);
    for (uint32_t i = 0; i < kLinks; ++i) {
      if (i == kSilent) continue;
      EXPECT_EQ((*c.ran)[i].load(), 1) << "link " << i;
    }
    std::vector<unsigned char> bytes = fetch(run.get(), c.last);
    ASSERT_EQ(bytes.size(), 8u);
    uint64_t value = 0;
    std::memcpy(&value, bytes.data(), 8);
    EXPECT_EQ(value, kLinks - 1);
  }
  {
    // Not retried: the link fails naming what it did not make, and nothing after it runs.
    SilentLinkChain c = silent_link_chain(kLinks, kSilent, 0);
    RunPtr run(submit(pool.get(), c.graph.get()));
    ASSERT_NE(run, nullptr);
    EXPECT_EQ(gf_run_wait(run.get(), kWaitMs), GF_ERR_TASK_FAILED);
    const std::string error = task_error(run.get(), c.tasks[kSilent]);
    EXPECT_NE(error.find("returned success without producing data #"), std::string::npos) << error;
    EXPECT_EQ((*c.ran)[kSilent + 1].load(), 0);
    EXPECT_EQ(task_state(run.get(), c.tasks[kSilent + 1]), GF_TASK_FAILED);
    EXPECT_EQ(task_state(run.get(), c.tasks[kSilent - 1]), GF_TASK_SUCCEEDED);
  }
  expect_ledger_idle(pool.get());
}

}  // namespace
