// Soak machinery, part 3: checking runs and pool-wide invariants, one round of the random soak,
// and the Soak fixture.
#pragma once

#include "soak_graphs.hpp"

namespace soak {

// Checking runs

inline const char *task_state_name(gf_task_state s) {
  switch (s) {
    case GF_TASK_WAITING:
      return "WAITING";
    case GF_TASK_QUEUED:
      return "QUEUED";
    case GF_TASK_RUNNING:
      return "RUNNING";
    case GF_TASK_SUCCEEDED:
      return "SUCCEEDED";
    case GF_TASK_FAILED:
      return "FAILED";
    case GF_TASK_CANCELLED:
      return "CANCELLED";
    default:
      return "?";
  }
}

inline bool terminal(gf_task_state s) {
  return s == GF_TASK_SUCCEEDED || s == GF_TASK_FAILED || s == GF_TASK_CANCELLED;
}

// The states of a run's tasks, for a run that did not finish or finished wrongly.
inline std::string dump_tasks(gf_run *run,
                              const std::vector<std::pair<std::string, gf_task>> &tasks) {
  std::ostringstream o;
  int counts[8] = {};
  int listed = 0;
  for (const auto &[name, ref] : tasks) {
    gf_task_state st = GF_TASK_STATE_FORCE32;
    if (gf_run_task_state(&st, run, ref) != GF_OK) {
      o << "\n    " << name << ": gf_run_task_state -> " << last_error();
      continue;
    }
    const int i = static_cast<int>(st);
    if (i >= 1 && i <= 6) counts[i]++;
    if (st != GF_TASK_SUCCEEDED && listed < 25) {
      ++listed;
      uint32_t attempts = 0, worker = 0;
      const char *err = nullptr;
      gf_run_task_attempts(&attempts, run, ref);
      const bool placed = gf_run_task_worker(&worker, run, ref) == GF_OK;
      gf_run_task_error(&err, run, ref);
      o << "\n    " << name << ": " << task_state_name(st) << ", attempts " << attempts;
      if (placed) o << ", worker " << worker;
      if (err != nullptr && *err != '\0') o << ", error: " << err;
    }
  }
  gf_run_stats st = GF_RUN_STATS_INIT;
  gf_run_stats_get(&st, run);
  std::ostringstream head;
  head << "task states: waiting " << counts[1] << ", queued " << counts[2] << ", running "
       << counts[3] << ", succeeded " << counts[4] << ", failed " << counts[5] << ", cancelled "
       << counts[6] << "; stats: attempts " << st.attempts << ", transfers " << st.transfers
       << ", elapsed " << st.elapsed_s << " s" << o.str();
  return head.str();
}

inline std::string dump_run(gf_run *run, const GraphPlan &gp) {
  std::vector<std::pair<std::string, gf_task>> tasks;
  for (const TaskPlan &t : gp.tasks) tasks.emplace_back(t.name, t.ref);
  return dump_tasks(run, tasks);
}

inline std::string dump_devices(const gf_pool *pool) {
  std::ostringstream o;
  uint32_t n = 0;
  gf_pool_device_count(&n, pool);
  for (uint32_t d = 0; d < n; ++d) {
    gf_device_memory m = GF_DEVICE_MEMORY_INIT;
    gf_pool_device_memory(&m, pool, d);
    o << "\n    device " << d << ": capacity " << m.capacity << ", resident " << m.resident
      << ", reserved " << m.reserved << ", spilled " << m.spilled << ", spilled_total "
      << m.spilled_total << ", unspilled_total " << m.unspilled_total;
  }
  return o.str();
}

enum class Fetched { Ok, NotAvailable, Bad };

// Fetches `d` and checks every byte. GF_ERR_STATE is NotAvailable (the caller decides whether
// that is acceptable; *why gets the message); anything else but GF_OK is a finding.
inline Fetched fetch_and_check(gf_run *run, const GraphPlan &gp, const DataPlan &d, Rng &rng,
                               std::string *why = nullptr, bool running = false) {
  constexpr uint64_t kCanary = 16;
  const bool roomy = rng.chance(0.5);  // a larger destination: the extra bytes must stay intact
  std::vector<unsigned char> buf(static_cast<size_t>(d.size + kCanary), 0xCD);
  uint64_t got = ~0ull;
  const gf_status s = gf_run_fetch(&got, run, d.ref, buf.data(), roomy ? d.size + kCanary : d.size);
  if (s == GF_ERR_STATE) {
    if (why != nullptr) *why = last_error();
    return Fetched::NotAvailable;
  }
  const std::string what = gp.label + ": gf_run_fetch(" + d.name + ", " + std::to_string(d.size) +
                           " bytes" + (d.host ? ", a host input" : "") + ")" +
                           (running ? " while the run was running" : " after the run finished");
  if (s != GF_OK) {
    finding(std::string("gf_run_fetch -> ") + gf_status_name(s), what + " -> " + describe(s));
    return Fetched::Bad;
  }
  if (got != d.size) {
    finding("gf_run_fetch reports another size than the producer wrote",
            what + " reports " + std::to_string(got) + " bytes");
    return Fetched::Bad;
  }
  if (checksum(buf.data(), d.size) != d.checksum) {
    finding("gf_run_fetch returned bytes that differ from what the producer wrote",
            what + ": " + pattern_mismatch(buf.data(), d.size, d.seed));
    return Fetched::Bad;
  }
  for (uint64_t i = d.size; i < d.size + kCanary; ++i) {
    if (buf[static_cast<size_t>(i)] != 0xCD) {
      finding("gf_run_fetch wrote past the end of the buffer", what);
      return Fetched::Bad;
    }
  }
  return Fetched::Ok;
}

struct CallbackLog {
  std::atomic<int> calls{0};
  std::atomic<int> state{0};
};

extern "C" inline void record_completion(gf_run *, gf_run_state state, void *user) {
  auto *log = static_cast<CallbackLog *>(user);
  log->state.store(static_cast<int>(state));
  log->calls.fetch_add(1);
}

// Checks a finished run against its plan: the wait status, every task's state and attempts,
// the counters, the callback, and every fetchable buffer's bytes.
inline void check_finished(gf_run *run, const GraphPlan &gp, gf_status status,
                           const std::string &msg, bool cancel_requested, const CallbackLog *log,
                           Rng &rng) {
  std::ostringstream ctx_text;
  ctx_text << gp.label << " (gf_run_wait -> " << gf_status_name(status) << ": " << msg
           << "; cancel requested: " << (cancel_requested ? "yes" : "no")
           << "; a task fails by design: " << (gp.has_doomed ? "yes" : "no") << ")";
  const std::string context = ctx_text.str();
  bool status_ok = false;
  if (status == GF_OK) status_ok = !gp.has_doomed;
  if (status == GF_ERR_TASK_FAILED) status_ok = gp.has_doomed;
  if (status == GF_ERR_CANCELLED) status_ok = cancel_requested;
  if (!status_ok)
    finding(std::string("gf_run_wait -> ") + gf_status_name(status) +
                (cancel_requested ? " after gf_run_cancel" : " without gf_run_cancel") +
                (gp.has_doomed ? ", a task fails by design" : ", no task fails by design"),
            context + "\n  " + dump_run(run, gp));
  if (!cancel_requested && status == GF_ERR_TASK_FAILED && gp.permafail >= 0) {
    const std::string &culprit = gp.tasks[static_cast<size_t>(gp.permafail)].name;
    if (msg.find(culprit) == std::string::npos)
      finding("gf_run_wait's message does not name the failed task",
              context + ": should name " + culprit);
  }
  gf_run_state rs = GF_RUN_STATE_FORCE32;
  GF_EXPECT_OK(gf_run_state_get(&rs, run));
  const gf_run_state want_rs = status == GF_OK                ? GF_RUN_SUCCEEDED
                               : status == GF_ERR_TASK_FAILED ? GF_RUN_FAILED
                                                              : GF_RUN_CANCELLED;
  if (rs != want_rs)
    finding("gf_run_state_get disagrees with gf_run_wait",
            context + ": state " + std::to_string(static_cast<int>(rs)));
  if (log != nullptr) {
    if (log->calls.load() != 1)
      finding("the completion callback did not run exactly once before gf_run_wait returned",
              context + ": " + std::to_string(log->calls.load()) + " calls");
    else if (log->state.load() != static_cast<int>(rs))
      finding("the completion callback was given another state than gf_run_state_get reports",
              context + ": callback " + std::to_string(log->state.load()) + ", run " +
                  std::to_string(static_cast<int>(rs)));
  }

  std::vector<gf_task_state> states(gp.tasks.size(), GF_TASK_STATE_FORCE32);
  uint64_t succeeded = 0, failed = 0, cancelled = 0;
  for (size_t i = 0; i < gp.tasks.size(); ++i) {
    const TaskPlan &t = gp.tasks[i];
    gf_task_state st = GF_TASK_STATE_FORCE32;
    GF_EXPECT_OK(gf_run_task_state(&st, run, t.ref));
    states[i] = st;
    succeeded += st == GF_TASK_SUCCEEDED;
    failed += st == GF_TASK_FAILED;
    cancelled += st == GF_TASK_CANCELLED;
    uint32_t attempts = 0;
    GF_EXPECT_OK(gf_run_task_attempts(&attempts, run, t.ref));
    const char *err_ptr = nullptr;
    GF_EXPECT_OK(gf_run_task_error(&err_ptr, run, t.ref));
    const std::string err = err_ptr != nullptr ? err_ptr : "<null>";
    std::string problem;  // the category: no names or numbers in it
    if (!terminal(st)) {
      problem = "not finished in a finished run";
    } else if (!cancel_requested && st != (t.doomed ? GF_TASK_FAILED : GF_TASK_SUCCEEDED)) {
      problem = std::string("expected ") + (t.doomed ? "FAILED" : "SUCCEEDED") + " (no cancel)";
    } else if (cancel_requested && !t.doomed && st == GF_TASK_FAILED) {
      problem = "FAILED after gf_run_cancel although nothing it depends on fails by design";
      if (t.fail_first && attempts == 1 && err.find("planned first-attempt failure") == 0)
        problem += " (its first attempt failed as planned and it had a retry left)";
    } else if (st == GF_TASK_SUCCEEDED && attempts != (t.fail_first ? 2u : 1u)) {
      problem = t.fail_first ? "succeeded with attempts != 2 after a planned first-attempt failure"
                             : "succeeded with attempts != 1";
    } else if (!cancel_requested && t.always_fail && attempts != t.retries + 1) {
      problem = "a failing task did not use exactly its retries";
    } else if (!cancel_requested && t.always_fail &&
               err.find("planned permanent failure") == std::string::npos) {
      problem = "a failing task's error text lost the body's message";
    }
    if (!problem.empty())
      finding("task " + std::string(task_state_name(st)) + ": " + problem,
              context + "\n  " + t.name + ": " + task_state_name(st) + ", attempts " +
                  std::to_string(attempts) + ", planned first-attempt failure: " +
                  (t.fail_first ? "yes" : "no") + ", retries " + std::to_string(t.retries) +
                  ", error: " + err + "\n  " + dump_run(run, gp));
  }

  gf_run_stats st = GF_RUN_STATS_INIT;
  GF_EXPECT_OK(gf_run_stats_get(&st, run));
  if (st.tasks != gp.tasks.size() || st.succeeded != succeeded || st.failed != failed ||
      st.cancelled != cancelled || st.attempts < succeeded) {
    std::ostringstream o;
    o << context << ": stats tasks " << st.tasks << ", succeeded " << st.succeeded << ", failed "
      << st.failed << ", cancelled " << st.cancelled << ", attempts " << st.attempts
      << "; task states: " << gp.tasks.size() << " tasks, succeeded " << succeeded << ", failed "
      << failed << ", cancelled " << cancelled;
    finding("gf_run_stats_get disagrees with the task states", o.str());
  }

  for (int i : gp.fetchable) {
    const DataPlan &d = gp.data[static_cast<size_t>(i)];
    const bool produced = d.host || states[static_cast<size_t>(d.producer)] == GF_TASK_SUCCEEDED;
    std::string why;
    const Fetched f = fetch_and_check(run, gp, d, rng, &why);
    if (produced && f == Fetched::NotAvailable)
      finding("gf_run_fetch -> GF_ERR_STATE for kept data whose producer succeeded",
              context + ": " + d.name + ": " + why);
    if (!produced && f == Fetched::Ok)
      finding("gf_run_fetch returned data whose producer did not succeed", context + ": " + d.name);
  }
}

// ---------------------------------------------------------------------------------------------
// Pool-wide invariants

inline uint32_t device_count(const gf_pool *pool) {
  uint32_t n = 0;
  GF_EXPECT_OK(gf_pool_device_count(&n, pool));
  return n;
}

inline bool devices_empty(const gf_pool *pool) {
  const uint32_t n = device_count(pool);
  for (uint32_t d = 0; d < n; ++d) {
    gf_device_memory m = GF_DEVICE_MEMORY_INIT;
    if (gf_pool_device_memory(&m, pool, d) != GF_OK) return false;
    if (m.resident != 0 || m.reserved != 0 || m.spilled != 0) return false;
  }
  return true;
}

// Ledger lines with in_use != 0 or peak_in_use > capacity; "" when there are none.
inline std::string ledger_problems(const gf_pool *pool) {
  std::ostringstream o;
  uint32_t workers = 0;
  GF_EXPECT_OK(gf_pool_worker_count(&workers, pool));
  for (uint32_t w = 0; w < workers; ++w) {
    uint32_t size = 0;
    GF_EXPECT_OK(gf_pool_ledger_size(&size, pool, w));
    for (uint32_t i = 0; i < size; ++i) {
      gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
      GF_EXPECT_OK(gf_pool_ledger_entry(&e, pool, w, i));
      if (e.in_use != 0.0 || e.peak_in_use > e.capacity)
        o << "\n    worker " << w << " " << (e.resource ? e.resource : "<null>") << ": in_use "
          << e.in_use << ", peak " << e.peak_in_use << ", capacity " << e.capacity;
    }
  }
  return o.str();
}

// Every run destroyed: ledgers at zero, device memory at zero, every graph's user data released.
// Returns false (after reporting) when the pool is not idle.
inline bool expect_pool_idle(const gf_pool *pool, const std::string &when) {
  bool idle = true;
  wait_until([&] { return ledger_problems(pool).empty(); }, 10000ms);
  const std::string ledger = ledger_problems(pool);
  if (!ledger.empty()) {
    finding("ledger not back to zero once every run was destroyed", when + ":" + ledger);
    idle = false;
  }
  if (!wait_until([&] { return devices_empty(pool); }, 10000ms)) {
    finding("device memory not back to zero once every run was destroyed",
            when + ":" + dump_devices(pool));
    idle = false;
  }
  if (!wait_until([] { return g_live_plans.load() == 0; }, 10000ms)) {
    finding("task user data never released once every graph and run was destroyed",
            when + ": " + std::to_string(g_live_plans.load()) + " still alive");
    idle = false;
  }
  return idle;
}

// Samples every ledger line and device while work runs: 0 <= in_use <= capacity at all times.
class InvariantSampler {
 public:
  explicit InvariantSampler(const gf_pool *pool)
      : pool_(pool), thread_([this] {
          while (!done_.load()) {
            sample();
            std::this_thread::sleep_for(2ms);
          }
        }) {}
  InvariantSampler(const InvariantSampler &) = delete;
  InvariantSampler &operator=(const InvariantSampler &) = delete;
  ~InvariantSampler() {
    done_.store(true);
    thread_.join();
  }

 private:
  void sample() {
    uint32_t workers = 0;
    if (gf_pool_worker_count(&workers, pool_) != GF_OK) return;
    for (uint32_t w = 0; w < workers; ++w) {
      uint32_t size = 0;
      if (gf_pool_ledger_size(&size, pool_, w) != GF_OK) continue;
      for (uint32_t i = 0; i < size; ++i) {
        gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
        if (gf_pool_ledger_entry(&e, pool_, w, i) != GF_OK) continue;
        if (e.in_use < 0.0 || e.in_use > e.capacity || e.peak_in_use > e.capacity)
          report("worker " + std::to_string(w) + " resource " + (e.resource ? e.resource : "?") +
                 ": in_use " + std::to_string(e.in_use) + ", peak " +
                 std::to_string(e.peak_in_use) + ", capacity " + std::to_string(e.capacity));
      }
    }
    uint32_t devices = 0;
    if (gf_pool_device_count(&devices, pool_) != GF_OK) return;
    for (uint32_t d = 0; d < devices; ++d) {
      gf_device_memory m = GF_DEVICE_MEMORY_INIT;
      if (gf_pool_device_memory(&m, pool_, d) != GF_OK) continue;
      if (m.resident + m.reserved > m.capacity)
        report("device " + std::to_string(d) + ": resident " + std::to_string(m.resident) +
               " + reserved " + std::to_string(m.reserved) + " > capacity " +
               std::to_string(m.capacity));
    }
  }
  void report(const std::string &what) {
    finding("sampler: a ledger line or a device over-committed while work ran", what);
  }

  const gf_pool *pool_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------
// The random soak

struct SoakTotals {
  std::atomic<uint64_t> runs{0}, tasks{0}, waited{0}, fetched_while_running{0}, cancelled{0},
      destroyed_early{0}, fetches_ok{0}, fetches_early_ok{0}, fetches_not_ready{0};
};

struct Round {
  gf_pool *pool = nullptr;
  uint64_t capacity = 0;
  Clock::time_point deadline;
  std::atomic<bool> *stop = nullptr;  // set on a hang: every thread winds down
  SoakTotals *totals = nullptr;
  std::mutex m;
  std::vector<std::shared_ptr<CallbackLog>> logs;  // alive until the round's checks
};

// Reports a run that did not finish in time and stops the soak.
inline void report_hang(Round &r, gf_run *run, const GraphPlan &gp, const char *where) {
  finding("a run did not finish within " + std::to_string(kRunWaitMs / 1000) + " s",
          gp.label + " (" + where + ")\n  " + dump_run(run, gp) +
              "\n  devices:" + dump_devices(r.pool));
  r.stop->store(true);
}

// Fetches random fetchable buffers while the run is running; returns the final poll status
// (GF_TIMEOUT if it did not finish before `until`). A fetch that succeeds must be exact.
inline gf_status fetch_while_running(Round &r, gf_run *run, const GraphPlan &gp, Rng &rng,
                                     Clock::time_point until, std::string *msg) {
  gf_status s = GF_TIMEOUT;
  while ((s = gf_run_poll(run)) == GF_TIMEOUT) {
    *msg = "";
    if (Clock::now() > until) return GF_TIMEOUT;
    if (gp.fetchable.empty()) {
      std::this_thread::sleep_for(200us);
      continue;
    }
    const int i = gp.fetchable[static_cast<size_t>(rng.below(gp.fetchable.size()))];
    const Fetched f = fetch_and_check(run, gp, gp.data[static_cast<size_t>(i)], rng, nullptr, true);
    if (f == Fetched::Ok) r.totals->fetches_early_ok.fetch_add(1);
    if (f == Fetched::NotAvailable) r.totals->fetches_not_ready.fetch_add(1);
    if (f == Fetched::Bad) r.stop->store(true);
  }
  *msg = last_error();
  return s;
}

inline void execute_one(Round &r, GraphPlan &gp, Rng &rng) {
  std::shared_ptr<CallbackLog> log;
  gf_submit_options opts = GF_SUBMIT_OPTIONS_INIT;
  if (rng.chance(0.5)) {
    log = std::make_shared<CallbackLog>();
    std::lock_guard<std::mutex> lock(r.m);
    r.logs.push_back(log);
    opts.on_complete = record_completion;
    opts.user_data = log.get();
  }
  gf_run *run = nullptr;
  const gf_status submitted = gf_graph_submit(&run, r.pool, gp.graph.get(), &opts);
  if (submitted != GF_OK) {
    ADD_FAILURE() << gp.label << ": gf_graph_submit -> " << describe(submitted);
    r.stop->store(true);
    if (log) log->calls.store(1);  // no run, no callback to wait for
    return;
  }
  r.totals->runs.fetch_add(1);
  r.totals->tasks.fetch_add(gp.tasks.size());
  if (rng.chance(0.5)) gp.graph.reset();  // runs keep the graph's contents alive

  const uint64_t plan = rng.below(100);
  const auto until = Clock::now() + std::chrono::milliseconds(kRunWaitMs);
  std::string msg;
  if (plan < 30) {  // wait, then check everything
    const gf_status s = gf_run_wait(run, kRunWaitMs);
    msg = last_error();
    if (s == GF_TIMEOUT)
      report_hang(r, run, gp, "gf_run_wait");
    else
      check_finished(run, gp, s, msg, false, log.get(), rng);
    r.totals->waited.fetch_add(1);
  } else if (plan < 52) {  // fetch kept buffers while it runs, then check everything
    const gf_status s = fetch_while_running(r, run, gp, rng, until, &msg);
    if (s == GF_TIMEOUT)
      report_hang(r, run, gp, "polling while fetching");
    else
      check_finished(run, gp, s, msg, false, log.get(), rng);
    r.totals->fetched_while_running.fetch_add(1);
  } else if (plan < 76) {  // another thread cancels at a random moment
    const auto delay = std::chrono::microseconds(rng.below(20000));
    std::thread canceller([run, delay] {
      std::this_thread::sleep_for(delay);
      const gf_status c = gf_run_cancel(run);
      EXPECT_EQ(c, GF_OK) << "gf_run_cancel -> " << describe(c);
    });
    gf_status s = GF_TIMEOUT;
    if (rng.chance(0.5)) s = fetch_while_running(r, run, gp, rng, until, &msg);
    if (s == GF_TIMEOUT && Clock::now() < until) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      s = gf_run_wait(run, std::max<int64_t>(1, left.count()));
      msg = last_error();
    }
    canceller.join();
    if (s == GF_TIMEOUT)
      report_hang(r, run, gp, "after gf_run_cancel");
    else
      check_finished(run, gp, s, msg, true, log.get(), rng);
    r.totals->cancelled.fetch_add(1);
  } else if (plan < 92) {  // destroyed while running, perhaps after a few fetches
    const auto stop_at = Clock::now() + std::chrono::microseconds(rng.below(10000));
    if (rng.chance(0.5)) {
      while (Clock::now() < stop_at && !gp.fetchable.empty()) {
        const int i = gp.fetchable[static_cast<size_t>(rng.below(gp.fetchable.size()))];
        if (fetch_and_check(run, gp, gp.data[static_cast<size_t>(i)], rng, nullptr, true) ==
            Fetched::Ok)
          r.totals->fetches_early_ok.fetch_add(1);
      }
    } else {
      std::this_thread::sleep_until(stop_at);
    }
    r.totals->destroyed_early.fetch_add(1);
  } else {  // cancelled, then destroyed without waiting
    GF_EXPECT_OK(gf_run_cancel(run));
    r.totals->destroyed_early.fetch_add(1);
  }
  gf_run_destroy(run);
}

inline void submitter(Round &r, uint64_t seed, const std::string &prefix) {
  SCOPED_TRACE(seed_note() + ", submitter " + prefix);
  Rng rng(seed);
  GenLimits lim;
  lim.device_capacity = r.capacity;
  for (int k = 0; !r.stop->load() && Clock::now() < r.deadline; ++k) {
    GraphPlan gp = build_graph(rng, lim, prefix + "g" + std::to_string(k));
    if (!gp.ok) {
      r.stop->store(true);
      break;
    }
    execute_one(r, gp, rng);
    if (::testing::Test::HasFatalFailure()) r.stop->store(true);
  }
}

// A fresh, small, failure-free graph that must run correctly on a pool that has been through a
// round.
inline void expect_pool_still_works(gf_pool *pool, uint64_t capacity, uint64_t seed,
                                    const std::string &label) {
  Rng rng(seed);
  GenLimits lim;
  lim.device_capacity = capacity;
  lim.min_tasks = 10;
  lim.max_tasks = 20;
  lim.failures = false;
  lim.sleeps = false;
  GraphPlan gp = build_graph(rng, lim, label);
  ASSERT_TRUE(gp.ok) << label;
  gf_run *raw = nullptr;
  const gf_status s = gf_graph_submit(&raw, pool, gp.graph.get(), nullptr);
  ASSERT_EQ(s, GF_OK) << label << ": gf_graph_submit -> " << describe(s);
  RunPtr run(raw);
  const gf_status w = gf_run_wait(run.get(), kRunWaitMs);
  const std::string msg = last_error();
  ASSERT_NE(w, GF_TIMEOUT) << label << ": a fresh graph did not finish within " << kRunWaitMs / 1000
                           << " s\n  " << dump_run(run.get(), gp);
  check_finished(run.get(), gp, w, msg, false, nullptr, rng);
}

// ---------------------------------------------------------------------------------------------
// The fixture: seed, watchdog, anomaly log

class Soak : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = current_test_name();
    seed_ = seed_for(name_);
    findings().reset();
    const auto limit = std::chrono::seconds(120 + static_cast<int64_t>(soak_seconds()));
    watchdog_.emplace(name_, limit);
    std::printf(
        "[soak] %s: base seed %llu (GPUFLOW_SOAK_SEED), budget %.1f s for the binary "
        "(GPUFLOW_SOAK_SECONDS)\n",
        name_.c_str(), static_cast<unsigned long long>(base_seed()), soak_seconds());
    std::fflush(stdout);
  }
  void TearDown() override {
    watchdog_.reset();
    if (findings().total() != 0)
      std::printf("[soak] %s: problems seen, by kind:%s\n", name_.c_str(),
                  findings().summary().c_str());
    if (HasFailure()) std::printf("[soak] %s failed; %s\n", name_.c_str(), seed_note().c_str());
  }
  // This test's share of the binary's time budget.
  Clock::duration budget(double share) const {
    return std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(soak_seconds() * share));
  }

  std::string name_;
  uint64_t seed_ = 0;
  std::optional<Watchdog> watchdog_;
};

inline std::string mib(uint64_t bytes) {
  std::ostringstream o;
  o.precision(1);
  o << std::fixed << static_cast<double>(bytes) / static_cast<double>(MiB) << " MiB";
  return o.str();
}

}  // namespace soak
