// The scheduler put together from its parts, a run prepared and started (its roots queued in
// slices, alike ones as spans), and the pool shut down.
#include "scheduler/scheduler.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "scheduler/run_setup.hpp"

namespace gf {

Scheduler::Scheduler(DeviceBackend &backend, ResourceRegistry registry,
                     std::vector<std::unique_ptr<WorkerState>> workers, ResourceId gpu_memory,
                     double spill_threshold)
    : backend_(backend),
      registry_(std::move(registry)),
      workers_(std::move(workers)),
      gpu_memory_(gpu_memory),
      feasibility_(registry_, workers_, gpu_memory_),
      notifier_(workers_.size()),
      memory_(backend, workers_, notifier_, spill_threshold, *this) {
  uint32_t cpu_threads = 0;
  for (auto &w : workers_) {
    if (w->kind == GF_WORKER_CPU) cpu_threads += w->threads;
    if (w->space != kHostSpace) w->memory.bind(&w->ledger, gpu_memory_);
  }
  // A pause for every two CPU threads that may be trying at once: 2 threads try again after
  // every pause, 16 space their tries by up to 8 (docs/benchmarks.md has the measurements).
  lock_pauses_ = static_cast<int>(std::clamp<uint32_t>(cpu_threads / 2, 1, kMostLockPauses));
  batch_budget_s_ = batch_budget_for(cpu_threads);
}

double Scheduler::batch_budget_for(uint32_t cpu_threads) {
  // Each taking of the mutex costs its taker the lines the last holder wrote, the more so the
  // more threads take turns, so wider pools take longer batches. Up to 4 threads keep the budget
  // measured best on 2; every 4 more add as much again, up to 4 times (docs/benchmarks.md).
  constexpr double kBatchBudget = 20e-6;
  return kBatchBudget * std::clamp<uint32_t>(cpu_threads / 4, 1, 4);
}

Scheduler::~Scheduler() = default;

std::shared_ptr<RunState> Scheduler::prepare(std::shared_ptr<Graph> graph,
                                             const BodyResolvers &bodies) {
  auto run = std::make_shared<RunState>(graph);
  run->spare_arrays = spare_arrays_;  // the arrays of the run that finished last, if they suit
  spare_arrays_->take(run->tasks, graph->task_count(), run->data, graph->data_count());
  DataSetup data_setup(*run);  // a large graph's on a helper thread, while this one freezes it
  const GraphAnalysis &analysis = graph->freeze();
  run->requests = feasibility_.resolve_requests(*graph);
  run->cost_ids = estimates_.map_cost_keys(*graph);
  run->tiny_costs = std::make_unique<std::atomic<bool>[]>(run->cost_ids.size());
  if (graph->has_named_kernels() || graph->has_commands())
    Feasibility::resolve_bodies(*run, bodies);
  feasibility_.check(*run);
  set_up_tasks(*run, analysis);
  // Read only for joins, after their counts (join_counts); written before read, each slot by its
  // producer's thread: nothing to set up.
  if (run->join_counts) {
    run->made_buffers = std::make_unique_for_overwrite<RunState::MadeBuffer[]>(graph->data_count());
  }
  data_setup.finish();
  run->tasks_left = graph->task_count();
  return run;
}

void Scheduler::start(const std::shared_ptr<RunState> &run) {
  const Graph *graph = &run->graph();
  const GraphAnalysis &analysis = graph->analysis();
  Deferred deferred;
  Lock lock(mu_);
  if (stopping_) fail(GF_ERR_SHUT_DOWN, "the pool is shutting down; the graph was not submitted");
  // Roots queued in one slice share one clock reading (queue waits: add_observer). The stamp
  // is cleared under the mutex on every way out, a throw included; declared after `lock`, the
  // guard runs first, and only while the lock is held (enqueue_ready reads the stamp under it).
  struct StampGuard {
    Clock::time_point &stamp;
    const Lock &held;
    ~StampGuard() {
      if (held.owns_lock()) stamp = {};
    }
  } stamp_guard{enqueue_stamp_, lock};
  const bool observe = observers_.load(std::memory_order_relaxed) != 0;
  if (observe) enqueue_stamp_ = Clock::now();
  run->sequence = next_run_sequence_++;
  estimates_.publish_tiny(*run);  // what earlier runs learnt
  runs_.emplace(run.get(), run);
  maybe_finish_run(*run, deferred);
  // Roots are placed in slices, releasing the mutex between them, so that workers start on a
  // huge graph while the rest of it is still being placed.
  constexpr size_t kSlice = 4096;
  const auto &roots = analysis.roots;
  // Consecutive roots (in graph order) go to the same worker in groups, as Dask co-assigns
  // root tasks: siblings of a reduction then meet where their inputs already are.
  size_t threads = 0;
  for (auto &w : workers_) threads += w->threads;
  const size_t group = std::max<size_t>(1, roots.size() / std::max<size_t>(1, threads));
  uint32_t group_worker = kNoIndex;
  size_t in_group = 0;
  // A root with a CPU body only, no inputs and the cost key and request of the last one placed in
  // its group goes where that one went at its estimate, without weighing every worker again.
  // Placement weighs the workers afresh for each group and after each slice.
  auto cpu_root = [&](TaskIndex t) {
    const TaskBody &body = run->body(t);
    return graph->task(t).input_count == 0 && body.cpu_fn && !body.gpu_fn;
  };
  bool follow = false;  // the last root placed was a CPU root: the next like it may follow it
  uint32_t follow_key = 0;
  RequestId follow_request = kEmptyRequest;
  TaskIndex last_placed = kNoIndex;  // the root placed last (followed or made ready)
  int32_t last_priority = 0;         // its priority
  double follow_estimate_s = 0;
  // Roots that followed, queued since the last wake: one wake for them all (wake_after_queueing).
  TaskIndex followed_last = kNoIndex;
  uint32_t followed = 0;
  auto wake_for_followed = [&]() GF_REQUIRES(scheduling_lock) {
    if (followed) wake_after_queueing(*workers_[group_worker], *run, followed_last, followed);
    followed = 0;
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    const TaskIndex root = roots[i];
    if (run->tasks[root].state == GF_TASK_WAITING) {
      // The root right after the last one placed, and alike it, follows it without a look at its
      // description (Graph::repeats_previous); others are looked at.
      const bool alike_last =
          last_placed != kNoIndex && root == last_placed + 1 && graph->repeats_previous(root);
      if (follow && in_group < group &&
          (alike_last || (graph->task(root).cost_key == follow_key &&
                          graph->task(root).request == follow_request && cpu_root(root)))) {
        const int32_t priority = alike_last ? last_priority : graph->task(root).priority;
        // With it, the alike roots right after it in task number and rank (a wide graph's),
        // up to the group's or the slice's end, follow as one span.
        const size_t most = std::min({roots.size() - i, group - in_group, kSlice - i % kSlice});
        const uint32_t count =
            queue_plain_roots(*run, i, static_cast<uint32_t>(most), *workers_[group_worker],
                              follow_estimate_s, priority);
        last_priority = priority;
        followed_last = last_placed = root + count - 1;
        followed += count;
        in_group += count;
        i += count - 1;
      } else {
        wake_for_followed();
        const TaskBody &body = run->body(root);
        const gf_worker_kind kind = body.cpu_fn ? GF_WORKER_CPU : GF_WORKER_GPU;
        const double estimate_s = estimate(*run, root, kind);
        const double tolerance = static_cast<double>(group) * estimate_s;
        const uint32_t preferred = in_group < group ? group_worker : kNoIndex;
        const uint32_t chosen = make_ready(*run, root, preferred, deferred, tolerance);
        last_placed = root;
        last_priority = graph->task(root).priority;
        in_group = chosen == group_worker ? in_group + 1 : 1;
        group_worker = chosen;
        follow = chosen != kNoIndex && cpu_root(root);
        follow_key = graph->task(root).cost_key;
        follow_request = graph->task(root).request;
        follow_estimate_s = estimate_s;
      }
    }
    if ((i + 1) % kSlice == 0 && i + 1 < roots.size()) {
      wake_for_followed();
      enqueue_stamp_ = {};
      lock.unlock();
      lock.lock();
      if (observe) enqueue_stamp_ = Clock::now();
      follow = false;  // what the workers did meanwhile is weighed again
    }
  }
  wake_for_followed();
  enqueue_stamp_ = {};
  lock.unlock();
  deferred.flush(backend_);
}

void Scheduler::shutdown() {
  Deferred deferred;
  {
    Lock lock(mu_);
    stopping_ = true;
    std::vector<RunState *> runs;
    for (auto &[raw, run] : runs_) runs.push_back(raw);
    for (RunState *run : runs) cancel_locked(*run, "the pool was shut down", deferred);
    for (auto &w : workers_) notifier_.wake_all(w->index);
  }
  deferred.flush(backend_);
}

}  // namespace gf
