// A ready task placed on a worker (placement.hpp chooses which), its inputs fetched there, queued
// once they have arrived, and an idle thread woken to take it.
#include <algorithm>

#include "scheduler/placement.hpp"
#include "scheduler/scheduler.hpp"

namespace gf {

uint32_t Scheduler::make_ready(RunState &run, TaskIndex t, uint32_t preferred_worker,
                               Deferred &deferred, double tolerance_s) {
  const TaskDesc &task = run.graph().task(t);
  const ResolvedRequest &r = run.requests[task.request];
  std::vector<PlacementOption> &options = placement_options_;
  options.clear();
  const TaskBody &body = run.body(t);
  // On a device, the inputs, declared outputs and gpu_memory must fit together, or the task
  // could only wait there for ever (moving data in and out). Only device workers need the sum,
  // so CPU-only placements (the hot path of most graphs) never compute it.
  const uint64_t device_bytes =
      body.gpu_fn && !r.gpu_workers.empty() ? memory_.task_device_bytes(run, t) : 0;
  bool too_big_somewhere = false;
  // Whether every input has a copy in host memory (mostly so for CPU tasks): then nothing moves
  // for a CPU worker, and place() need not look at the inputs again.
  bool in_host = false;
  auto consider = [&](const std::vector<uint32_t> &eligible, gf_task_fn fn,
                      gf_worker_kind kind) GF_REQUIRES(scheduling_lock) {
    if (!fn) return;
    double compute = estimate(run, t, kind);
    if (kind == GF_WORKER_CPU) {  // all in host memory: the inputs' transfer is the same for each
      in_host = memory_.inputs_in(run, t, kHostSpace);
      const double transfer = in_host ? 0.0 : memory_.transfer_seconds(run, t, kHostSpace);
      add_interchangeable(
          options, eligible,
          // (Called within this function, under the mutex.)
          [this](uint32_t w) GF_NO_THREAD_SAFETY_ANALYSIS {
            return workers_[w]->backlog_s / workers_[w]->threads;
          },
          preferred_worker, transfer, compute);
      return;
    }
    for (uint32_t w : eligible) {
      const WorkerState &worker = *workers_[w];
      if (worker.space != kHostSpace && !worker.memory.could_fit(r.request, device_bytes)) {
        too_big_somewhere = true;
        continue;
      }
      double transfer = task.input_count ? memory_.transfer_seconds(run, t, worker.space) : 0.0;
      options.push_back({w, worker.backlog_s / worker.threads, transfer, compute});
    }
  };
  consider(r.cpu_workers, body.cpu_fn, GF_WORKER_CPU);
  consider(r.gpu_workers, body.gpu_fn, GF_WORKER_GPU);
  if (options.empty() && too_big_somewhere) {
    fail_task(run, t,
              "out of memory: " + run.graph().task_label(t) + " needs " +
                  std::to_string(device_bytes) + " bytes of inputs and outputs plus " +
                  std::to_string(static_cast<uint64_t>(r.gpu_memory.to_double())) +
                  " bytes of gpu_memory on one device at once, more than any device of this "
                  "pool holds",
              deferred);
    return kNoIndex;
  }
  const PlacementOption &chosen = options[choose_placement(options, preferred_worker, tolerance_s)];
  place(run, t, chosen.worker, chosen.compute_s, deferred, in_host);
  return chosen.worker;
}

void Scheduler::place(RunState &run, TaskIndex t, uint32_t w, double estimate_s, Deferred &deferred,
                      bool inputs_in_host) {
  WorkerState &worker = *workers_[w];
  TaskRun &tr = run.tasks[t];
  queued_on(worker, tr, estimate_s);
  if (worker.space != kHostSpace) Memory::hold_inputs(worker, run, t, +1);
  if (worker.space == kHostSpace && inputs_in_host) {
    tr.missing_inputs = 0;
    tr.memory_blocked = false;
  } else if (run.graph().task(t).input_count) {
    memory_.fetch_inputs(worker, run, t, deferred);
  }
  if (tr.missing_inputs == 0) {
    enqueue_ready(worker, run, t);
  } else {
    worker.fetching.push_back(TaskRef{&run, t});
  }
  if (!worker.granted && demand_listener_) demand_listener_();
}

uint32_t Scheduler::queue_plain_roots(RunState &run, size_t i, uint32_t most, WorkerState &worker,
                                      double estimate_s, int32_t priority) {
  const Graph &graph = run.graph();
  const GraphAnalysis &a = graph.analysis();
  const TaskIndex first = a.roots[i];
  // Without edges every task is a root, ranked in task order (Graph::freeze): only the tasks'
  // states and alikeness are read, in one pass with their queueing (a wide graph's start()).
  const bool in_task_order = a.successors.empty();
  queued_on(worker, run.tasks[first], estimate_s);
  uint32_t count = 1;
  for (; count < most; ++count) {
    const TaskIndex next = first + count;
    if (!in_task_order && (a.roots[i + count] != next || a.order[next] != a.order[first] + count)) {
      break;
    }
    TaskRun &tr = run.tasks[next];
    if (tr.state != GF_TASK_WAITING || !graph.repeats_previous(next)) break;
    queued_on(worker, tr, estimate_s);
  }
  // Alike the root they follow (no inputs, a CPU body only, its cost key, request and estimate),
  // which start() queued on this worker just before them: they may all share its span, whose
  // first task's charge covers the rest when they share a batch (picking.cpp). start() stamps
  // only when observed.
  QueuedTask entry = queue_entry(run, first, enqueue_stamp_, priority);
  entry.span = count;
  worker.ready.push_following(entry);
  return count;
}

void Scheduler::wake_after_queueing(WorkerState &worker, RunState &run, TaskIndex last,
                                    uint32_t queued) {
  // As many signals as a wake_for per task would have sent: those stop once every idle thread
  // that may help has a wake on its way, and so does this loop.
  for (uint32_t i = 0; i < queued; ++i) {
    const uint64_t unwoken = notifier_.unwoken_total();
    wake_for(worker, run, last);
    if (notifier_.unwoken_total() == unwoken) break;
  }
  if (!worker.granted && demand_listener_) demand_listener_();
}

void Scheduler::enqueue_ready(WorkerState &worker, RunState &run, TaskIndex t) {
  const Clock::time_point ready_at = observers_.load(std::memory_order_relaxed) == 0
                                         ? Clock::time_point{}
                                     : enqueue_stamp_ != Clock::time_point{} ? enqueue_stamp_
                                                                             : Clock::now();
  worker.ready.push(queue_entry(run, t, ready_at));
  wake_for(worker, run, t);
}

void Scheduler::unqueue(WorkerState &worker, RunState &run, TaskIndex t) {
  Memory::hold_inputs(worker, run, t, -1);
}

void Scheduler::wake_for(WorkerState &worker, RunState &run, TaskIndex t) {
  wake_one(worker);
  if (worker.index == notifier_.completing_worker && worker.ready.size() <= 1) return;
  // More queued there than it has idle threads (none count while it lacks its grant): wake an
  // idle worker that may run the task, so it can steal it.
  const uint32_t idle_here = worker.granted ? notifier_.idle(worker.index) : 0;
  if (notifier_.idle_total() <= idle_here || worker.ready.size() <= idle_here) return;
  // Every idle thread of the other workers has a wake on its way already (they are still waking
  // while a wide graph's roots are placed): the search below would find no one, and reading each
  // worker's counters was 4 % of a wide graph's run.
  if (notifier_.unwoken_total() == notifier_.unwoken(worker.index)) {
    return;
  }
  const TaskDesc &task = run.graph().task(t);
  const ResolvedRequest &r = run.requests[task.request];
  auto wake_idle_of = [&](const std::vector<uint32_t> &eligible, gf_task_fn fn)
                          GF_REQUIRES(scheduling_lock) {
                            if (!fn) return false;
                            for (uint32_t w : eligible) {
                              WorkerState &other = *workers_[w];
                              if (w != worker.index && notifier_.unwoken(w) > 0) {
                                wake_one(other);
                                return true;
                              }
                            }
                            return false;
                          };
  const TaskBody &body = run.body(t);
  if (!wake_idle_of(r.cpu_workers, body.cpu_fn)) wake_idle_of(r.gpu_workers, body.gpu_fn);
}

}  // namespace gf
