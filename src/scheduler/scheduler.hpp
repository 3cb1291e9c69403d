// The scheduler: one state machine for every task of every run on a pool (docs/scheduler.md has
// its states and transitions, its parts and its concurrency contract).
//
// waiting -> queued (placed on a worker; inputs moving) -> running -> succeeded / failed /
// cancelled, with retries back to waiting; or waiting -> running for a successor a worker thread
// ran right after its last predecessor (direct_run.hpp). This class is the pipeline: the public
// calls and the steps of a task's life, one file each; its parts (Notifier, Memory, Estimates,
// DirectRuns) own their state. Everything is under one mutex, which worker threads take once
// per batch (report the last, take the next); work that must not run under it is collected in a
// Deferred and done after.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/events.hpp"
#include "devices/backend.hpp"
#include "scheduler/deferred.hpp"
#include "scheduler/direct_run.hpp"
#include "scheduler/estimates.hpp"
#include "scheduler/feasibility.hpp"
#include "scheduler/memory.hpp"
#include "scheduler/notifier.hpp"
#include "scheduler/observer.hpp"
#include "scheduler/placement.hpp"
#include "scheduler/resource_registry.hpp"
#include "scheduler/run_state.hpp"
#include "scheduler/scheduling_lock.hpp"
#include "scheduler/task_attempt.hpp"
#include "scheduler/worker_state.hpp"

namespace gf {

class Scheduler final : private MovementSink {
 public:
  Scheduler(DeviceBackend &backend, ResourceRegistry registry,
            std::vector<std::unique_ptr<WorkerState>> workers, ResourceId gpu_memory,
            double spill_threshold);
  ~Scheduler();

  // ---- callers (any thread) ----
  // Checks the graph against the pool and builds the run's state; nothing runs yet.
  // `bodies` resolves tasks that name their body (a kernel) or describe it (a command).
  // Runs outside the mutex, on state no other thread can reach yet (not checked by the
  // thread-safety analysis).
  std::shared_ptr<RunState> prepare(std::shared_ptr<Graph> graph,
                                    const BodyResolvers &bodies) GF_NO_THREAD_SAFETY_ANALYSIS;
  // Starts a prepared run (its completion may be published before this returns).
  void start(const std::shared_ptr<RunState> &run);
  void cancel(RunState &run);
  void shutdown();  // cancel everything, wake workers so they exit once their bodies return
  // The caller dropped the run: cancel it if still running, and once it has finished free what
  // it holds and let go of it. Idempotent.
  void release_run(RunState &run);

  // ---- queries (any thread): plain snapshots taken under the lock ----
  struct TaskSnapshot {
    gf_task_state state;
    uint32_t attempts;
    uint32_t worker;
    const char *error;  // "" unless settled failed or cancelled; stable for the run's life
  };
  TaskSnapshot task_snapshot(RunState &run, TaskIndex t);
  struct RunSnapshot {
    uint64_t tasks, succeeded, failed, cancelled, attempts, transfers, bytes_transferred;
    double elapsed_s;
  };
  RunSnapshot run_snapshot(RunState &run);
  // "<first failed task> failed: <its error> (N task(s) failed in all)".
  std::string failure_summary(RunState &run);
  // Copies buffer `d` to host memory at dst (size only when dst is null) and returns its size.
  // The data is pinned while its bytes are read, so no spill or free can move it meanwhile.
  uint64_t read_buffer(RunState &run, DataIndex d, void *dst, uint64_t capacity);
  void *read_value(RunState &run, DataIndex d);
  // The buffers of a finished run that can still be read (kept, or consumed by nobody), in data
  // order, with their sizes.
  std::vector<std::pair<DataIndex, uint64_t>> readable_buffers(RunState &run);
  std::vector<Ledger::Line> ledger_lines(uint32_t worker);
  // The whole pool at one instant, for dashboards and metrics (cheap: no per-task walk).
  struct PoolSnapshot {
    struct WorkerLoad {
      uint64_t ready = 0;     // queued with inputs present
      uint64_t fetching = 0;  // queued, inputs still moving
      uint32_t running = 0;
      bool granted = true;  // connected pools: holds its lease
      // Batches its threads took from its queue so far, each one taking of the scheduler's
      // mutex: tasks over batches is how far tiny tasks share that cost.
      uint64_t batches = 0;
    };
    struct RunProgress {
      uint64_t sequence = 0;
      uint64_t tasks = 0, succeeded = 0, failed = 0, cancelled = 0, left = 0;
      double elapsed_s = 0;
      bool finished = false;
    };
    std::vector<WorkerLoad> workers;
    std::vector<RunProgress> runs;  // runs the scheduler still keeps (running or unreleased)
    uint64_t waiting = 0, queued = 0, running = 0;  // tasks of the runs above, by state
    uint64_t succeeded_total = 0, failed_total = 0, cancelled_total = 0;  // since pool creation
    uint64_t transfers_total = 0, bytes_transferred_total = 0;
  };
  PoolSnapshot pool_snapshot();
  // Registers `observer` (scheduler/observer.hpp), set up first, until the handle goes. While
  // any is registered, each dispatch measures how long its task waited in the ready queue
  // (TaskAttempt::queue_wait_s); with none, nothing is measured, as it costs two clock reads per
  // task.
  ObserverHandle add_observer(std::shared_ptr<SchedulerObserver> observer) {
    observer->set_up(workers_.size());
    return ObserverHandle(observers_, std::move(observer));
  }
  // The cost key a FinishedTask's cost_id stands for ("" for a key made from a body alone).
  std::string cost_key_name(uint32_t cost_id) { return estimates_.cost_key_name(cost_id); }

  // ---- worker threads ----
  // Completes `batch` (if any), then fills it with the next tasks for `worker`, taking the mutex
  // once for both. Returns false when the worker should exit. Sleeps while there is nothing to
  // do. `deferred` must be flushed by the caller afterwards.
  bool next_batch(WorkerState &worker, Batch &batch, Deferred &deferred);
  // Completes `batch` for a thread that exits instead of picking again (a spare thread is no
  // longer needed), waking another thread for whatever became ready.
  void retire_thread(WorkerState &worker, Batch &batch, Deferred &deferred);
  // Asks for the cache lines that settling `item` under the mutex will write (its task's state,
  // its inputs' and outputs' data states, its successors' states), from its worker thread once
  // its body has run: settling a tree's tasks waited mostly on those misses. A hint: it reads
  // only what is immutable while the task is unsettled (the frozen graph, where the run's arrays
  // are).
  static void prefetch_settling(const TaskAttempt &item) {
    // Tasks without data (a wide graph's, a chain's) settle on task states alone, which sit in
    // task order: the hardware's prefetcher finds those, and such tasks pay no call here.
    if (!item.inputs.empty() || !item.outputs.empty()) prefetch_data_settling(item);
  }
  // (Reads only where state lies, never the state: not checked by the thread-safety analysis.)
  static void prefetch_data_settling(const TaskAttempt &item) GF_NO_THREAD_SAFETY_ANALYSIS;
  // A GPU task whose device work has finished (device_error empty on success). Takes the lock.
  void finish_async(WorkerState &worker, TaskAttempt &done, const std::string &device_error);
  // A body asks for a dynamic-size output: charge device memory now (takes the lock).
  bool charge_output(WorkerState &worker, uint64_t bytes);
  // A body sets a device value of `bytes` (gf_task_ctx_set_device_value): charge them now,
  // spilling other data off the device first when they do not fit, and waiting for those moves.
  // Takes the lock; false when no room can be made.
  bool charge_value(WorkerState &worker, uint64_t bytes);
  void discharge_output(WorkerState &worker, uint64_t bytes);
  // A device's memory as accounted here (takes the lock).
  gf_device_memory device_memory(int device);

  // ---- grants, for connected pools (scheduler/grants.cpp; any thread) ----
  // Called, under the scheduler's lock, when a task is placed on a worker that is not granted:
  // it must only note the demand (no call back into the scheduler). Set before runs start.
  void set_demand_listener(std::function<void()> listener) {
    demand_listener_ = std::move(listener);
  }
  // The worker may start tasks again (the service granted its device).
  void grant(uint32_t worker);
  // The worker starts no more tasks; returns how many still run there (hand the device back
  // once that is 0). Its queued tasks stay placed, and idle granted workers may steal them.
  uint32_t ungrant(uint32_t worker);
  // Whether the worker has tasks queued, fetching or running.
  bool has_work(uint32_t worker);
  // Fails every task queued or fetching on the worker with `reason` (its device cannot be had).
  void fail_placed(uint32_t worker, const std::string &reason);

  DeviceBackend &backend() { return backend_; }
  const ResourceRegistry &registry() const { return registry_; }
  // Where transfers and spills are reported (the pool's event stream). Set once, before any run.
  void set_events(const EventHub *events) { memory_.set_events(events); }
  ResourceId gpu_memory_resource() const { return gpu_memory_; }
  // Seconds of learnt work a batch of tiny tasks may hold in a pool of `cpu_threads` CPU threads.
  static double batch_budget_for(uint32_t cpu_threads);

 private:
  using Lock = SchedulingLock;

  // Places a task whose dependencies are done; returns the worker chosen.
  uint32_t make_ready(RunState &run, TaskIndex t, uint32_t preferred_worker, Deferred &deferred,
                      double tolerance_s = 0) GF_REQUIRES(scheduling_lock);
  // Queues task t on `worker`, once its inputs are there (fetching them first if need be;
  // `inputs_in_host`: the caller found every one in host memory).
  void place(RunState &run, TaskIndex t, uint32_t worker, double estimate_s, Deferred &deferred,
             bool inputs_in_host = false) GF_REQUIRES(scheduling_lock);
  // The task is placed on `worker` (place, queue_plain_roots, a steal) at `estimate_s`, which its
  // backlog counts from now on; a new placement epoch makes earlier transfer waiters stale.
  static void queued_on(WorkerState &worker, TaskRun &tr, double estimate_s)
      GF_REQUIRES(scheduling_lock) {
    tr.state = GF_TASK_QUEUED;
    tr.worker = worker.index;
    tr.placement_epoch++;
    tr.estimate_s = static_cast<float>(estimate_s);
    worker.backlog_s += estimate_s;
  }
  // Task t's entry in a ready queue, ready since `ready_at` (zero: its queue wait goes unmeasured),
  // at its priority (which a caller that knows it passes).
  static QueuedTask queue_entry(RunState &run, TaskIndex t, Clock::time_point ready_at,
                                int32_t priority) {
    return QueuedTask{priority, run.graph().analysis().order[t], run.sequence, &run, ready_at, t};
  }
  static QueuedTask queue_entry(RunState &run, TaskIndex t, Clock::time_point ready_at) {
    return queue_entry(run, t, ready_at, run.graph().task(t).priority);
  }
  void enqueue_ready(WorkerState &worker, RunState &run, TaskIndex t) GF_REQUIRES(scheduling_lock);
  // The root analysis.roots[i] and up to `most - 1` roots after it that are next in task number
  // and rank, still waiting, and alike the one before them (of one `priority`, which the caller
  // knows), all following the last root placed in their group (start(): no inputs, a CPU body
  // only, its cost key and request, on the CPU worker that one went to): place() and
  // enqueue_ready() without what cannot apply to them, as one span, and without waking anyone;
  // returns how many were queued. The caller then wakes once for the roots it queued in a row
  // (wake_after_queueing).
  uint32_t queue_plain_roots(RunState &run, size_t i, uint32_t most, WorkerState &worker,
                             double estimate_s, int32_t priority) GF_REQUIRES(scheduling_lock);
  void wake_after_queueing(WorkerState &worker, RunState &run, TaskIndex last, uint32_t queued)
      GF_REQUIRES(scheduling_lock);
  void wake_for(WorkerState &worker, RunState &run, TaskIndex t) GF_REQUIRES(scheduling_lock);
  void wake_one(WorkerState &worker) GF_REQUIRES(scheduling_lock) {
    notifier_.wake_one(worker.index);
  }
  // The task leaves `worker` without running (stolen, cancelled, failed while queued or fetching).
  void unqueue(WorkerState &worker, RunState &run, TaskIndex t) GF_REQUIRES(scheduling_lock);

  // A worker thread's batch (work_loop.cpp), its successors run directly (adoption.cpp,
  // direct_run.hpp), its next tasks (picking.cpp, stealing.cpp).
  void complete_batch(WorkerState &worker, Batch &batch, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  // Successors run directly: the bookkeeping of a start for a successor that already ran (kWaits:
  // some of its predecessors are not reported yet; kRefused: it is not the scheduler's to adopt);
  // and giving back one that is not, with what its body made.
  enum class Adoption { kAdopted, kWaits, kRefused };
  Adoption adopt(WorkerState &worker, TaskAttempt &item) GF_REQUIRES(scheduling_lock);
  void drop_continued(WorkerState &worker, TaskAttempt &item, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  // A successor run directly whose predecessors have not all been reported yet (some ran in
  // other threads' batches, still running or unreported): kept, with what its body made, until
  // the last of them is completed (release_successors), then adopted and completed there.
  void park(WorkerState &worker, TaskAttempt &item) GF_REQUIRES(scheduling_lock);
  void adopt_parked(RunState &run, TaskIndex t, Deferred &deferred) GF_REQUIRES(scheduling_lock);
  bool pick(WorkerState &worker, Batch &batch, Deferred &deferred) GF_REQUIRES(scheduling_lock);
  // The estimate a queued task starts with on `worker`: the one it was queued with, unless that
  // was kUnknownDuration and its cost key has been learnt since (a new graph's roots, queued
  // at its start before any of them ran). The tasks of an entry's span share it.
  float estimate_at_start(const WorkerState &worker, const QueuedTask &entry) const
      GF_REQUIRES(scheduling_lock);
  // `count` consecutive tasks from `first` start on `worker` (their resources taken, if any)
  // with `estimate_s` (estimate_at_start): counted as running, out[0..count) made ready for
  // their bodies. count > 1: the rest of a span pick() took, each alike the one before it
  // (Graph::alike_previous: no inputs, no request).
  void started(WorkerState &worker, RunState &run, TaskIndex first, uint32_t count,
               Clock::time_point ready_at, float estimate_s, TaskAttempt *out)
      GF_REQUIRES(scheduling_lock);
  // Starts the task `entry` stands for when it fits now: its request charged (unless
  // `shares_charge`: the batch's first task's charge covers it), its inputs resolved. On a
  // device, a task first in line that does not fit makes room for itself.
  bool try_dispatch(WorkerState &worker, const QueuedTask &entry, float estimate_s,
                    TaskAttempt &out, Deferred &deferred, bool first_in_line, bool shares_charge)
      GF_REQUIRES(scheduling_lock);
  bool steal(WorkerState &thief, Deferred &deferred) GF_REQUIRES(scheduling_lock);
  // Tasks steal_one moved between CPU workers as they were queued, which wakes no one: the
  // last of them, and how many (steal wakes once for them all).
  struct MovedAsQueued {
    QueuedTask last{};
    uint32_t count = 0;
  };
  // What one steal() has taken so far: tasks and their estimated seconds.
  struct StealBudget {
    double limit_s;  // the scheduler's batch_budget_s_
    size_t tasks = 0;
    double seconds = 0;
    // Whether, having taken `more_tasks` (`more_seconds`) beyond these, the steal may take one
    // task more while the thief's and the victim's queues hold `thief_has` and `victim_has`:
    // a long batch's worth at most, and up to half the victim's queue.
    bool allows(size_t thief_has, size_t victim_has, size_t more_tasks = 0,
                double more_seconds = 0) const GF_REQUIRES(scheduling_lock);
  };
  // Moves the head of victim's queue to thief when that is worth it (with more of its span,
  // within the budget); returns whether anything moved, counted in `budget`.
  bool steal_one(WorkerState &thief, WorkerState *victim, Deferred &deferred, MovedAsQueued &moved,
                 StealBudget &budget) GF_REQUIRES(scheduling_lock);
  void fail_stuck_on_memory(Deferred &deferred) GF_REQUIRES(scheduling_lock);

  // An attempt ends (settling.cpp); a run ends (runs.cpp).
  // Settles `count` attempts of one run reported together, in order: one, or a row of
  // successes of tasks of one cost key (their times learnt into one estimate), whose items
  // after the first may be successors run directly, adopted here in turn. Returns how
  // many it settled: fewer than `count` when one of those cannot be adopted yet (the caller
  // parks or drops it).
  size_t finish(WorkerState &worker, TaskAttempt *items, size_t count, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  // finish()'s steps for each attempt: what it held goes back (its worker's backlog, its inputs'
  // use counts, its request in the ledger) and its time is learnt, whatever its outcome; then
  // it succeeded, or failed (retried, failed for good, or cancelled).
  void end_attempt(WorkerState &worker, TaskAttempt &done, Estimates::Row &learnt)
      GF_REQUIRES(scheduling_lock);
  void fail_attempt(WorkerState &worker, TaskAttempt &done, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  // Gives back what an attempt that will not count made: its outputs and their device memory.
  void release_outputs(WorkerState &worker, const TaskAttempt &done, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  void succeed(WorkerState &worker, TaskAttempt &done, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  // succeed's parts: the outputs become data; successors whose last dependency this was become
  // ready.
  void store_outputs(WorkerState &worker, const TaskAttempt &done, const TaskDesc &task)
      GF_REQUIRES(scheduling_lock);
  void store_left_inputs(RunState &run, const TaskAttempt &item) GF_REQUIRES(scheduling_lock);
  void release_successors(WorkerState &worker, RunState &run, TaskIndex t, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  void fail_task(RunState &run, TaskIndex t, std::string error, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  void settle(RunState &run, TaskIndex t, gf_task_state state, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  void consumed(RunState &run, DataIndex d, Deferred &deferred) GF_REQUIRES(scheduling_lock);
  void cancel_locked(RunState &run, const char *reason, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  void maybe_finish_run(RunState &run, Deferred &deferred) GF_REQUIRES(scheduling_lock);
  // A finished, released run: free its data and drop the scheduler's reference.
  void retire(RunState &run, Deferred &deferred) GF_REQUIRES(scheduling_lock);
  // The data, checked available for reading back (fails naming it otherwise).
  DataRun &readable(RunState &run, DataIndex d) GF_REQUIRES(scheduling_lock);

  // Copies and spills that ended (MovementSink, from backend threads): take the mutex, hand the
  // news to memory_ and move the tasks it completes or fails on.
  void transfer_done(const std::shared_ptr<RunState> &run, DataIndex d, SpaceId from, SpaceId to,
                     void *ptr, const std::string &error, Clock::time_point began) override;
  void spill_done(const std::shared_ptr<RunState> &run, DataIndex d, SpaceId space, void *host,
                  const std::string &error, Clock::time_point began) override;
  // Tasks whose inputs waited for device memory on `worker` fetch again; those whose inputs are
  // all there now are queued.
  void retry_memory_blocked(WorkerState &worker, Deferred &deferred) GF_REQUIRES(scheduling_lock);
  // Wakes every thread when nothing runs or moves: one of them looks for tasks stuck on memory.
  void wake_if_quiet() GF_REQUIRES(scheduling_lock);

  double estimate(const RunState &run, TaskIndex t, gf_worker_kind kind) const
      GF_REQUIRES(scheduling_lock) {
    return estimates_.estimate(run, t, kind);
  }

  // The scheduler's mutex: scheduling_lock in annotations (scheduling_lock.hpp). Private: no
  // caller outside the scheduler takes it (queries return snapshots).
  std::mutex mu_;

  // ---- Fixed once the pool is built ----
  DeviceBackend &backend_;
  ResourceRegistry registry_;
  std::vector<std::unique_ptr<WorkerState>> workers_;
  ResourceId gpu_memory_;
  // The most pauses between tries of a thread spinning for mu_ (lock_spinning), by the number
  // of CPU threads that may try at once.
  static constexpr uint32_t kMostLockPauses = 8;
  int lock_pauses_ = 1;
  // How much learnt work a batch of tiny tasks (and a thief's haul of them) may hold: longer
  // with more CPU threads, so that the mutex, taken once per batch, is held for a smaller share
  // of the time each thread spends away from it.
  double batch_budget_s_ = 0;
  // Set before any run starts (set_demand_listener), called under the mutex.
  std::function<void()> demand_listener_;
  // The last finished run's arrays, for the next run's (RunState::spare_arrays; its own mutex).
  std::shared_ptr<SpareRunArrays> spare_arrays_ = std::make_shared<SpareRunArrays>();
  std::atomic<uint32_t> observers_{0};  // registered observers (ObserverHandle keeps the count)

  // ---- The parts, each with its own state (and annotations) ----
  Feasibility feasibility_;
  Notifier notifier_;
  Memory memory_;
  Estimates estimates_;
  DirectRuns direct_;

  // ---- The pipeline's own, under the mutex ----
  // Every started run until it has both finished and been released by its caller.
  std::unordered_map<RunState *, std::shared_ptr<RunState>> runs_ GF_GUARDED_BY(scheduling_lock);
  uint64_t next_run_sequence_ GF_GUARDED_BY(scheduling_lock) = 1;
  bool stopping_ GF_GUARDED_BY(scheduling_lock) = false;
  struct Settled {
    uint64_t succeeded = 0, failed = 0, cancelled = 0;
  };
  Settled settled_totals_ GF_GUARDED_BY(scheduling_lock);
  uint64_t running_total_ GF_GUARDED_BY(scheduling_lock) = 0;  // tasks started, all workers
  // The ready time of tasks being queued together (a slice of roots in start(), a stolen task's
  // first queueing), so that they share one clock reading; zero otherwise.
  Clock::time_point enqueue_stamp_ GF_GUARDED_BY(scheduling_lock){};
  // make_ready's scratch (a member, not thread_local: TLS in a shared library costs a call).
  std::vector<PlacementOption> placement_options_ GF_GUARDED_BY(scheduling_lock);
};

}  // namespace gf
