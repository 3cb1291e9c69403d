// soak_test.cpp: random graphs with random cancellations, fetches and spilling on tiny emulated
// devices, for a bounded time, through the public ABI only (gpuflow.h). Built to run in the
// plain, ASan + UBSan and TSan builds.
//
// Every body writes a pattern derived from (graph, task, output index, checksums of the bytes it
// read), so the test recomputes every buffer independently: each fetched buffer must hold exactly
// what its producer wrote, and each body checks that its inputs hold what their producers wrote.
// After each round (all runs destroyed) every ledger line and every device's memory must be back
// to zero, and the pool must still run a fresh graph correctly.
//
// Environment:
//   GPUFLOW_SOAK_SECONDS  time budget for the whole binary (default 20); each test takes a share
//                         and stops by itself, so slow (sanitizer) builds do fewer iterations.
//   GPUFLOW_SOAK_SEED     base seed (decimal or 0x hex); printed by every test, and on failure.
//
// Failing cases fail fast and say why: runs are waited for with a timeout (60 s, then the states
// of the run's tasks are printed), and a watchdog aborts the process with a message naming the
// test and the seed if a test outlives 120 s plus the budget (a hang inside gf_run_destroy or
// gf_pool_destroy).
//
// The Soak.Adversarial* tests isolate findings from adversarial review so they run
// deterministically every time, rather than when the random soak happens to hit them.

#include "soak_checks.hpp"

namespace {

using namespace soak;

// Random graphs from several threads on pools of tiny emulated devices, with random
// cancellations, fetches while running, early destruction, retries and failures, for 60 % of the
// time budget. Each pool lives for two rounds; after each round the pool must be idle and work.
TEST_F(Soak, RandomGraphsCancellationsFetchesAndSpilling) {
  SCOPED_TRACE(seed_note());
  Rng rng(seed_);
  const auto end = Clock::now() + budget(0.6);
  std::atomic<bool> stop{false};
  SoakTotals totals;
  // Completion logs outlive every pool: a callback of a destroyed run may run late.
  std::vector<std::shared_ptr<CallbackLog>> all_logs;
  int epochs = 0, rounds = 0;
  // The soak keeps going after a problem (each kind is reported once, then counted) and stops
  // early only when a run hangs.
  while (epochs == 0 || (Clock::now() < end && !stop.load() && !HasFatalFailure())) {
    ++epochs;
    const uint64_t memories[] = {8 * MiB, 12 * MiB, 16 * MiB, 24 * MiB, 32 * MiB, 48 * MiB};
    const int cpus = rng.pick(1, 2), devices = rng.pick(1, 2);
    const uint64_t memory = memories[rng.below(6)];
    const double bandwidth = rng.uniform(5e8, 5e9);
    const uint32_t gpu_threads = static_cast<uint32_t>(rng.pick(1, 2));
    gf_pool_config c = host_config(cpus, devices, memory, bandwidth, gpu_threads);
    c.spill_threshold = rng.uniform(0.3, 0.85);
    std::ostringstream desc;
    desc << "pool " << epochs << ": " << c.cpu_workers << " cpu, " << c.emulated_devices << " x "
         << mib(c.emulated_device_memory) << " devices (" << c.gpu_worker_threads
         << " threads), spill at " << c.spill_threshold << ", " << c.emulated_bandwidth / 1e9
         << " GB/s";
    SCOPED_TRACE(desc.str());
    Pool pool = make_pool(c);
    ASSERT_NE(pool, nullptr);
    for (int k = 0; k < 2 && (k == 0 || Clock::now() < end) && !stop.load(); ++k) {
      ++rounds;
      Round r;
      r.pool = pool.get();
      r.capacity = c.emulated_device_memory;
      r.stop = &stop;
      r.totals = &totals;
      const auto left = end - Clock::now();
      r.deadline = Clock::now() + std::clamp<Clock::duration>(left, 200ms, 2500ms);
      const int threads = rng.pick(2, 4);
      {
        InvariantSampler sampler(pool.get());
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t) {
          const std::string prefix = "p" + std::to_string(epochs) + "r" + std::to_string(k) + "s" +
                                     std::to_string(t) + ".";
          ts.emplace_back(submitter, std::ref(r), rng.next(), prefix);
        }
        for (std::thread &t : ts) t.join();
      }
      const std::string when = desc.str() + ", after round " + std::to_string(k);
      for (const auto &log : r.logs) {
        if (!wait_until([&] { return log->calls.load() >= 1; }, 10000ms))
          finding("a run's completion callback never ran (runs destroyed before finishing)", when);
        if (log->calls.load() > 1) finding("a completion callback ran more than once", when);
      }
      all_logs.insert(all_logs.end(), r.logs.begin(), r.logs.end());
      if (stop.load()) break;  // a hang: the pool cannot be expected to be idle
      // A pool that is not idle would report the same leak every round: take a fresh one.
      if (!expect_pool_idle(pool.get(), when)) break;
      expect_pool_still_works(pool.get(), c.emulated_device_memory, rng.next(),
                              "fresh" + std::to_string(epochs) + "." + std::to_string(k));
      if (!expect_pool_idle(pool.get(), when + ", after a fresh graph")) break;
    }
    std::printf("[soak] %s:%s\n", desc.str().c_str(), dump_devices(pool.get()).c_str());
    pool.reset();
  }
  std::printf(
      "[soak] %d pools, %d rounds, %llu runs, %llu tasks: %llu waited, %llu fetched while "
      "running, %llu cancelled, %llu destroyed early; %llu fetches succeeded while "
      "running, %llu not ready yet\n",
      epochs, rounds, static_cast<unsigned long long>(totals.runs.load()),
      static_cast<unsigned long long>(totals.tasks.load()),
      static_cast<unsigned long long>(totals.waited.load()),
      static_cast<unsigned long long>(totals.fetched_while_running.load()),
      static_cast<unsigned long long>(totals.cancelled.load()),
      static_cast<unsigned long long>(totals.destroyed_early.load()),
      static_cast<unsigned long long>(totals.fetches_early_ok.load()),
      static_cast<unsigned long long>(totals.fetches_not_ready.load()));
  EXPECT_GT(totals.runs.load(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Adversarial findings, isolated

}  // namespace
