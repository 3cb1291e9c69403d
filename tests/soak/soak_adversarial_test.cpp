// soak_adversarial_test.cpp: findings of adversarial review, isolated so they run
// deterministically every time rather than when the random soak (soak_test.cpp) happens to hit
// them. Same machinery and fixture (soak_checks.hpp and the headers it includes).

#include "soak_checks.hpp"

namespace {

using namespace soak;

gf_device_memory device_memory(const gf_pool *pool, uint32_t d) {
  gf_device_memory m = GF_DEVICE_MEMORY_INIT;
  GF_EXPECT_OK(gf_pool_device_memory(&m, pool, d));
  return m;
}

// A GPU task that checks its input (if any) against a pattern, sleeps, and writes a pattern.
Body pattern_body(std::string label, uint64_t in_size, uint64_t in_seed, uint64_t out_size,
                  uint64_t out_seed, std::chrono::microseconds sleep) {
  return [=](gf_task_ctx *ctx) {
    if (in_size != 0) {
      const void *p = nullptr;
      uint64_t n = 0;
      if (gf_task_ctx_input(&p, &n, ctx, 0) != GF_OK) {
        finding("body: gf_task_ctx_input failed", label + ": " + last_error());
        return 1;
      }
      if (n != in_size ||
          checksum(static_cast<const unsigned char *>(p), n) != pattern_checksum(in_size, in_seed))
        finding("body: an input does not hold what its producer wrote", label);
    }
    if (sleep.count() > 0) std::this_thread::sleep_for(sleep);
    void *o = nullptr;
    if (gf_task_ctx_output(&o, ctx, 0, 0) != GF_OK) {
      finding("body: gf_task_ctx_output failed for a declared output", label + ": " + last_error());
      return 1;
    }
    fill_pattern(static_cast<unsigned char *>(o), out_size, out_seed);
    return 0;
  };
}

// (a) gf_run_fetch of kept buffers in a loop while the run is still running, on a 16 MiB device
// where the kept buffers are being spilled to make room for the rest of the graph. Every fetch
// that succeeds must return exactly the producer's bytes.
TEST_F(Soak, AdversarialFetchKeptBuffersWhileSpilling) {
  SCOPED_TRACE(seed_note());
  gf_pool_config c = host_config(1, 1, 16 * MiB, 2e9, 2);
  c.spill_threshold = 0.5;
  Pool pool = make_pool(c);
  ASSERT_NE(pool, nullptr);
  const auto end = Clock::now() + budget(0.1);
  constexpr uint64_t kSize = 4 * MiB;
  uint64_t ok_while_running = 0, not_ready = 0, iterations = 0;
  Rng rng(seed_);
  while (iterations < 2 || (Clock::now() < end && !HasFailure())) {
    ++iterations;
    GraphPlan gp;  // used for labels and fetch checks only
    gp.label = "fetch-while-spilling#" + std::to_string(iterations);
    gp.graph = make_graph();
    gf_graph *g = gp.graph.get();
    std::vector<gf_task> keepers;
    const uint64_t base = rng.next();
    for (int i = 0; i < 3; ++i) {
      DataPlan d;
      d.name = "kept" + std::to_string(i);
      d.size = kSize;
      d.keep = true;
      d.seed = base + static_cast<uint64_t>(i) * 0x1000000;
      d.checksum = pattern_checksum(d.size, d.seed);
      d.ref = must_add_buffer(g, d.name.c_str(), kSize, GF_DATA_KEEP);
      TaskSpec s;
      s.name = "keep" + std::to_string(i);
      s.priority = 10;
      s.outputs = {d.ref};
      s.gpu = pattern_body(gp.label + "/" + s.name, 0, 0, kSize, d.seed, 0us);
      keepers.push_back(must_add_task(g, s));
      gp.fetchable.push_back(static_cast<int>(gp.data.size()));
      gp.data.push_back(d);
    }
    // A chain of 4 MiB intermediates keeps the device over its spill threshold.
    gf_data prev{0};
    uint64_t prev_seed = 0;
    for (int i = 0; i < 24; ++i) {
      const uint64_t seed = base + 0x7000000 + static_cast<uint64_t>(i);
      gf_data out = must_add_buffer(g, ("churn" + std::to_string(i)).c_str(), kSize);
      TaskSpec s;
      s.name = "churn" + std::to_string(i);
      if (i > 0) s.inputs = {prev};
      if (i == 0) s.after = keepers;
      s.outputs = {out};
      s.gpu =
          pattern_body(gp.label + "/" + s.name, i > 0 ? kSize : 0, prev_seed, kSize, seed, 1000us);
      must_add_task(g, s);
      prev = out;
      prev_seed = seed;
    }
    RunPtr run(submit(pool.get(), g));
    ASSERT_NE(run, nullptr);
    const auto until = Clock::now() + std::chrono::milliseconds(kRunWaitMs);
    gf_status s = GF_TIMEOUT;
    size_t next = 0;
    while ((s = gf_run_poll(run.get())) == GF_TIMEOUT && Clock::now() < until) {
      const DataPlan &d = gp.data[next++ % gp.data.size()];
      const Fetched f = fetch_and_check(run.get(), gp, d, rng, nullptr, true);
      ok_while_running += f == Fetched::Ok;
      not_ready += f == Fetched::NotAvailable;
      ASSERT_NE(f, Fetched::Bad) << "while the run was running (iteration " << iterations
                                 << "):" << dump_devices(pool.get());
    }
    ASSERT_NE(s, GF_TIMEOUT) << gp.label << " did not finish within " << kRunWaitMs / 1000
                             << " s:" << dump_devices(pool.get());
    ASSERT_EQ(s, GF_OK) << gp.label << ": " << describe(s);
    for (const DataPlan &d : gp.data)
      ASSERT_EQ(fetch_and_check(run.get(), gp, d, rng), Fetched::Ok) << "after the run";
    run.reset();
    expect_pool_idle(pool.get(), gp.label);
  }
  const gf_device_memory m = device_memory(pool.get(), 0);
  std::printf(
      "[soak] %llu iterations: %llu fetches succeeded while running, %llu not ready; "
      "spilled %s in all\n",
      static_cast<unsigned long long>(iterations),
      static_cast<unsigned long long>(ok_while_running), static_cast<unsigned long long>(not_ready),
      mib(m.spilled_total).c_str());
  EXPECT_GT(m.spilled_total, 0u) << "nothing was spilled: this test did not exercise its case";
  EXPECT_GT(ok_while_running, 0u)
      << "no fetch succeeded while a run was running: this test did not exercise its case";
}

// `n` producers of `size` bytes (high priority, GPU) and `n` GPU consumers that check the bytes
// and write an 8-byte verdict (1 = intact).
struct FanGraph {
  Graph graph;
  std::vector<gf_data> verdicts;
};

FanGraph producers_then_consumers(int n, uint64_t size, uint64_t seed, const std::string &label) {
  FanGraph f;
  f.graph = make_graph();
  for (int i = 0; i < n; ++i) {
    const uint64_t s = seed + static_cast<uint64_t>(i);
    gf_data block = must_add_buffer(f.graph.get(), ("block" + std::to_string(i)).c_str(), size);
    gf_data verdict = must_add_buffer(f.graph.get(), ("verdict" + std::to_string(i)).c_str(), 8);
    TaskSpec produce;
    produce.name = "produce" + std::to_string(i);
    produce.priority = 10;
    produce.outputs = {block};
    produce.gpu = pattern_body(label + "/" + produce.name, 0, 0, size, s, 0us);
    must_add_task(f.graph.get(), produce);
    TaskSpec consume;
    consume.name = "consume" + std::to_string(i);
    consume.inputs = {block};
    consume.outputs = {verdict};
    consume.gpu = [size, s](gf_task_ctx *ctx) {
      const void *p = nullptr;
      uint64_t n_bytes = 0;
      if (gf_task_ctx_input(&p, &n_bytes, ctx, 0) != GF_OK) return 1;
      void *out = nullptr;
      if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
      const int64_t ok = n_bytes == size && checksum(static_cast<const unsigned char *>(p),
                                                     n_bytes) == pattern_checksum(size, s);
      std::memcpy(out, &ok, 8);
      return 0;
    };
    must_add_task(f.graph.get(), consume);
    f.verdicts.push_back(verdict);
  }
  return f;
}

// (b) Two threads submit small graphs with kept 4 MiB outputs, wait and destroy the run, while
// two others run producer/consumer graphs on the same 48 MiB emulated device. Must not crash;
// every run must succeed with the right bytes.
TEST_F(Soak, AdversarialKeptOutputsAndProducerConsumerShareADevice) {
  SCOPED_TRACE(seed_note());
  Pool pool = make_pool(host_config(1, 1, 48 * MiB, 1e10, 2));
  ASSERT_NE(pool, nullptr);
  const auto end = Clock::now() + budget(0.15);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> kept_runs{0}, fan_runs{0};
  std::vector<std::thread> threads;
  {
    InvariantSampler sampler(pool.get());
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t, seed = seed_ + static_cast<uint64_t>(t) * 0x100000000ull] {
        SCOPED_TRACE(seed_note() + ", thread " + std::to_string(t));
        Rng rng(seed);
        for (int k = 0; !stop.load() && (k < 2 || Clock::now() < end); ++k) {
          const std::string label = "thread" + std::to_string(t) + "#" + std::to_string(k);
          gf_run *raw = nullptr;
          GraphPlan gp;  // kept outputs, for the small graphs
          FanGraph fan;
          if (t < 2) {
            gp.label = label;
            gp.graph = make_graph();
            for (int i = 0; i < 2; ++i) {
              DataPlan d;
              d.name = "kept" + std::to_string(i);
              d.size = 4 * MiB;
              d.seed = rng.next();
              d.checksum = pattern_checksum(d.size, d.seed);
              d.ref = must_add_buffer(gp.graph.get(), d.name.c_str(), d.size, GF_DATA_KEEP);
              TaskSpec s;
              s.name = "make" + std::to_string(i);
              s.outputs = {d.ref};
              s.gpu = pattern_body(label + "/" + s.name, 0, 0, d.size, d.seed, 0us);
              must_add_task(gp.graph.get(), s);
              gp.data.push_back(d);
            }
            const gf_status s = gf_graph_submit(&raw, pool.get(), gp.graph.get(), nullptr);
            EXPECT_EQ(s, GF_OK) << label << ": " << describe(s);
          } else {
            fan = producers_then_consumers(3, 8 * MiB, rng.next(), label);
            const gf_status s = gf_graph_submit(&raw, pool.get(), fan.graph.get(), nullptr);
            EXPECT_EQ(s, GF_OK) << label << ": " << describe(s);
          }
          if (raw == nullptr) {
            stop.store(true);
            break;
          }
          RunPtr run(raw);
          const gf_status w = gf_run_wait(run.get(), kRunWaitMs);
          if (w == GF_TIMEOUT) {
            ADD_FAILURE() << label << ": did not finish within " << kRunWaitMs / 1000
                          << " s:" << dump_devices(pool.get());
            stop.store(true);
            break;
          }
          EXPECT_EQ(w, GF_OK) << label << ": " << describe(w);
          if (t < 2) {
            if (rng.chance(0.5)) {
              for (const DataPlan &d : gp.data)
                EXPECT_EQ(fetch_and_check(run.get(), gp, d, rng), Fetched::Ok) << label;
            }
            kept_runs.fetch_add(1);
          } else {
            for (gf_data v : fan.verdicts) {
              int64_t ok = 0;
              uint64_t size = 0;
              const gf_status f = gf_run_fetch(&size, run.get(), v, &ok, sizeof ok);
              EXPECT_EQ(f, GF_OK) << label << ": " << describe(f);
              EXPECT_EQ(ok, 1) << label << ": a consumer saw altered bytes";
            }
            fan_runs.fetch_add(1);
          }
          run.reset();  // destroyed right after the wait, while spills may still be under way
          if (HasFailure()) stop.store(true);
        }
      });
    }
    for (std::thread &t : threads) t.join();
  }
  std::printf("[soak] %llu kept-output runs, %llu producer/consumer runs:%s\n",
              static_cast<unsigned long long>(kept_runs.load()),
              static_cast<unsigned long long>(fan_runs.load()), dump_devices(pool.get()).c_str());
  if (!stop.load()) expect_pool_idle(pool.get(), "after the threads");
}

// (c) A task with three 30 MiB inputs on a 64 MiB device can never have them all on the device.
// It must finish within 20 s: succeed, or fail with an out-of-memory error naming the task;
// never hang. Inputs come from producers on the device, or from host buffers.
TEST_F(Soak, AdversarialThreeLargeInputsOnASmallDeviceNeverHang) {
  SCOPED_TRACE(seed_note());
  constexpr uint64_t kSize = 30 * MiB;
  for (int variant = 0; variant < 2; ++variant) {
    const std::string label =
        variant == 0 ? "inputs produced on the device" : "inputs from host buffers";
    SCOPED_TRACE(label);
    Pool pool = make_pool(host_config(1, 1, 64 * MiB, 1e10, 2));
    ASSERT_NE(pool, nullptr);
    Graph g = make_graph();
    std::vector<std::pair<std::string, gf_task>> tasks;
    std::vector<gf_data> inputs;
    std::vector<uint64_t> seeds;
    for (int i = 0; i < 3; ++i) {
      const uint64_t seed = seed_ + static_cast<uint64_t>(i);
      seeds.push_back(seed);
      gf_data d{0};
      const std::string name = "big" + std::to_string(i);
      if (variant == 0) {
        d = must_add_buffer(g.get(), name.c_str(), kSize);
        TaskSpec s;
        s.name = "produce" + std::to_string(i);
        s.outputs = {d};
        s.gpu = pattern_body(s.name, 0, 0, kSize, seed, 0us);
        tasks.emplace_back(s.name, must_add_task(g.get(), s));
      } else {
        const std::vector<unsigned char> bytes = pattern(kSize, seed);
        GF_ASSERT_OK(gf_graph_add_host_buffer(&d, g.get(), name.c_str(), bytes.data(), kSize, 0));
      }
      inputs.push_back(d);
    }
    gf_data verdict = must_add_buffer(g.get(), "verdict", 8, GF_DATA_KEEP);
    TaskSpec s;
    s.name = "needs_three_30MiB_inputs";
    s.inputs = inputs;
    s.outputs = {verdict};
    if (variant == 0) s.resources = {{"GPU", 1.0}};
    s.gpu = [seeds](gf_task_ctx *ctx) {
      int64_t ok = 1;
      for (uint32_t i = 0; i < 3; ++i) {
        const void *p = nullptr;
        uint64_t n = 0;
        if (gf_task_ctx_input(&p, &n, ctx, i) != GF_OK) return 1;
        ok =
            ok && n == kSize &&
            checksum(static_cast<const unsigned char *>(p), n) == pattern_checksum(kSize, seeds[i]);
      }
      void *out = nullptr;
      if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
      std::memcpy(out, &ok, 8);
      return 0;
    };
    const gf_task consumer = must_add_task(g.get(), s);
    tasks.emplace_back(s.name, consumer);
    RunPtr run(submit(pool.get(), g.get()));
    ASSERT_NE(run, nullptr);
    const auto started = Clock::now();
    const gf_status w = gf_run_wait(run.get(), 20000);
    const std::string msg = last_error();
    const double took = std::chrono::duration<double>(Clock::now() - started).count();
    std::printf("[soak] %s: gf_run_wait -> %s after %.2f s: %s\n", label.c_str(), gf_status_name(w),
                took, msg.c_str());
    if (w == GF_TIMEOUT) {  // reported; the other variant still runs
      ADD_FAILURE() << "still running after 20 s: " << dump_tasks(run.get(), tasks)
                    << "\n  devices:" << dump_devices(pool.get());
    } else if (w == GF_OK) {
      int64_t ok = 0;
      uint64_t size = 0;
      GF_EXPECT_OK(gf_run_fetch(&size, run.get(), verdict, &ok, sizeof ok));
      EXPECT_EQ(ok, 1) << "the consumer saw altered inputs";
    } else {
      EXPECT_TRUE(w == GF_ERR_TASK_FAILED || w == GF_ERR_OUT_OF_MEMORY)
          << gf_status_name(w) << ": " << msg;
      EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
      EXPECT_NE(msg.find(s.name), std::string::npos) << "the message should name the task: " << msg;
      EXPECT_EQ(task_state(run.get(), consumer), GF_TASK_FAILED);
      for (size_t i = 0; i + 1 < tasks.size(); ++i)
        EXPECT_EQ(task_state(run.get(), tasks[i].second), GF_TASK_SUCCEEDED)
            << tasks[i].first << " fits on the device and must succeed";
    }
    run.reset();
    expect_pool_idle(pool.get(), label);
  }
}

// (d) A completion callback that calls gf_run_state_get on its own run handle after the owner
// called gf_run_destroy (the run finishes because of the destroy, on the destroying thread or on
// a worker thread afterwards) must get GF_OK: the handle stays valid for the callback.
struct SelfQuery {
  std::atomic<int> calls{0};
  std::atomic<int> status{1000};
  std::atomic<int> state{0};
  std::atomic<int> callback_state{0};
  std::atomic<bool> destroy_called{false};
  std::atomic<bool> after_destroy{false};
};

extern "C" void query_own_run(gf_run *run, gf_run_state state, void *user) {
  auto *q = static_cast<SelfQuery *>(user);
  q->after_destroy.store(q->destroy_called.load());
  gf_run_state st = GF_RUN_STATE_FORCE32;
  const gf_status s = gf_run_state_get(&st, run);
  q->status.store(static_cast<int>(s));
  q->state.store(static_cast<int>(st));
  q->callback_state.store(static_cast<int>(state));
  q->calls.fetch_add(1);
}

TEST_F(Soak, AdversarialCallbackQueriesItsRunAfterOwnerDestroyedIt) {
  SCOPED_TRACE(seed_note());
  std::vector<std::shared_ptr<SelfQuery>> queries;  // outlive every run and the pool
  Pool pool = make_pool(host_config(1, -1));        // one CPU worker, no devices
  ASSERT_NE(pool, nullptr);
  Rng rng(seed_);
  const auto end = Clock::now() + budget(0.05);
  int iterations = 0, after_destroy = 0;
  const char *variants[] = {"running body finishes after the destroy",
                            "queued task cancelled by "
                            "the destroy",
                            "destroy races with natural completion"};
  while (iterations < 9 || (Clock::now() < end && !HasFailure())) {
    const int variant = iterations++ % 3;
    SCOPED_TRACE(std::string(variants[variant]) + ", iteration " + std::to_string(iterations));
    auto q = std::make_shared<SelfQuery>();
    queries.push_back(q);
    gf_submit_options opts = GF_SUBMIT_OPTIONS_INIT;
    opts.on_complete = query_own_run;
    opts.user_data = q.get();

    auto started = std::make_shared<std::atomic<bool>>(false);
    auto release = std::make_shared<std::atomic<bool>>(false);
    Graph blocker_graph;
    RunPtr blocker;
    if (variant == 1) {  // the only worker is busy with another run: the target stays queued
      blocker_graph = make_graph();
      TaskSpec b;
      b.name = "blocker";
      b.cpu = [started, release](gf_task_ctx *) {
        started->store(true);
        wait_until([&] { return release->load(); }, 20000ms);
        return 0;
      };
      must_add_task(blocker_graph.get(), b);
      blocker.reset(submit(pool.get(), blocker_graph.get()));
      ASSERT_NE(blocker, nullptr);
      ASSERT_TRUE(wait_until([&] { return started->load(); }));
    }
    Graph g = make_graph();
    for (int i = 0; i < (variant == 2 ? 3 : 1); ++i) {
      TaskSpec t;
      t.name = "task" + std::to_string(i);
      if (variant == 0) {
        t.cpu = [started](gf_task_ctx *ctx) {
          started->store(true);
          wait_until([&] { return gf_task_ctx_cancelled(ctx) != 0; }, 20000ms);
          std::this_thread::sleep_for(2ms);  // finish well after gf_run_destroy returned
          return 0;
        };
      } else {
        t.cpu = [](gf_task_ctx *) { return 0; };
      }
      must_add_task(g.get(), t);
    }
    gf_run *run = nullptr;
    GF_ASSERT_OK(gf_graph_submit(&run, pool.get(), g.get(), &opts));
    if (variant == 0) {
      ASSERT_TRUE(wait_until([&] { return started->load(); }));
    }
    if (variant == 2) std::this_thread::sleep_for(std::chrono::microseconds(rng.below(500)));
    q->destroy_called.store(true);
    gf_run_destroy(run);
    release->store(true);
    if (blocker) GF_EXPECT_OK(gf_run_wait(blocker.get(), kWaitMs));
    ASSERT_TRUE(wait_until([&] { return q->calls.load() >= 1; }, 10000ms))
        << "the completion callback never ran";
    std::this_thread::sleep_for(1ms);
    const std::string where =
        std::string(variants[variant]) + ", iteration " + std::to_string(iterations) +
        (q->after_destroy.load() ? ", the callback ran after gf_run_destroy"
                                 : ", the callback ran before gf_run_destroy");
    if (q->calls.load() != 1)
      finding("the completion callback did not run exactly once",
              where + ": " + std::to_string(q->calls.load()) + " calls");
    const auto status = static_cast<gf_status>(q->status.load());
    if (status != GF_OK)
      finding(std::string(variants[variant]) + ": gf_run_state_get on its own run inside the " +
                  "completion callback -> " + gf_status_name(status) + " (want GF_OK)",
              where);
    else if (q->state.load() != q->callback_state.load())
      finding("gf_run_state_get inside the callback disagrees with the state it was given",
              where + ": " + std::to_string(q->state.load()) + " vs " +
                  std::to_string(q->callback_state.load()));
    after_destroy += q->after_destroy.load();
  }
  std::printf("[soak] %d iterations, %d callbacks ran after gf_run_destroy was called\n",
              iterations, after_destroy);
  expect_ledger_idle(pool.get());
  pool.reset();
}

}  // namespace
