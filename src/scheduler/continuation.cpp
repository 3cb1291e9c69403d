// A finishing worker runs its task's only successor directly (issue 29, item 2): a chain of
// plain tasks costs one taking of the scheduler's mutex per batch of links instead of one per
// link. The worker thread decides without the mutex, from what is immutable once a run started
// (the frozen graph, the run's resolved requests and bodies, its sequence); the scheduler adopts
// the successor as dispatched when it completes the batch, in the same taking of the mutex as the
// predecessor's completion; a cancel meanwhile leaves it to that report (TaskRun::claim), so a
// task whose body ran is never reported cancelled. Only successors that need nothing beyond a CPU
// slot and touch no data qualify, so the ledger, device memory, transfers and spilling never see
// the difference.
#include <algorithm>

#include "scheduler/scheduler.hpp"

namespace gf {
namespace {

// How many successors a batch may run directly before its thread reports back: what a batch of
// tiny tasks may hold (dispatch.cpp's kLongBatch), so progress and estimates stay as fresh.
constexpr size_t kMaxContinued = 64;

}  // namespace

void Scheduler::allow_continuation(WorkerState &worker, Batch &batch) {
  // Not where the scheduler must see each task start: a connected pool's worker runs tasks only
  // while it holds its grant, and observers measure each task's queue wait.
  batch.may_continue = worker.kind == GF_WORKER_CPU && worker.granted && !demand_listener_ &&
                       observers_.load(std::memory_order_relaxed) == 0;
  batch.has_bar = batch.may_continue && !worker.ready.empty();
  if (batch.has_bar) batch.bar = worker.ready.top();
}

bool Scheduler::continuation(const WorkerState &worker, const Batch &batch, Dispatch &next) {
  if (!batch.may_continue || batch.count == 0 || batch.count >= kMaxContinued) return false;
  const Dispatch &done = batch.items[batch.count - 1];
  if (!done.ok || done.skipped || done.handed_off) return false;
  // An output it did not set fails it at completion (after which it may be retried): its
  // successor must then not have run.
  for (const Dispatch::Output &o : done.outputs) {
    if (!o.set) return false;
  }
  const RunState &run = *done.run;
  if (run.cancel_requested.load(std::memory_order_relaxed)) return false;
  const Graph &graph = run.graph();
  const GraphAnalysis &a = graph.analysis();
  // Its only successor, which waits for nothing else: it becomes ready exactly when `done`'s
  // completion is processed, unless that completion fails it or the run is cancelled first
  // (complete_batch then drops it).
  if (a.successor_begin[done.task + 1] - a.successor_begin[done.task] != 1) return false;
  const TaskIndex s = a.successors[a.successor_begin[done.task]];
  if (a.predecessor_count[s] != 1) return false;
  const TaskDesc &task = graph.task(s);
  if (task.request != kEmptyRequest || task.input_count || task.output_count) return false;
  const TaskBody &body = run.body(s);
  // A task that could also run on a device is left to placement, which weighs both.
  if (!body.cpu_fn || body.gpu_fn) return false;
  const std::vector<uint32_t> &eligible = run.requests[task.request].cpu_workers;
  if (std::find(eligible.begin(), eligible.end(), worker.index) == eligible.end()) return false;
  // Priorities and graph order: it must not overtake what was first in this worker's queue when
  // the batch was picked (tasks queued later wait for the batch, as they would anyway).
  if (batch.has_bar &&
      runs_later(QueuedTask{task.priority, a.order[s], run.sequence, nullptr, s, {}}, batch.bar)) {
    return false;
  }
  // Last: a cancel settling the run's waiting tasks takes the same claim, so either the cancel
  // leaves this task to the batch's report, or this thread does not run it.
  if (!done.run->tasks[s].claim.take()) return false;
  next.run = done.run;
  next.task = s;
  next.attempt = 1;  // it has never run: its only predecessor finishes just now
  next.inputs.clear();
  next.outputs.clear();
  next.ok = next.skipped = false;
  next.error.clear();
  next.seconds = 0;
  next.timed = true;
  next.tiny = done.tiny;  // the batch's timing was chosen for its first tasks
  next.ready_at = {};
  next.queue_wait_s = 0;
  next.ended_at = {};
  next.handed_off = false;
  next.continued = true;
  return true;
}

void Scheduler::adopt(WorkerState &worker, Dispatch &item) {
  // What try_dispatch does for a task without resources or inputs; it never sat in a queue, so
  // it was never counted in the worker's backlog.
  RunState &run = *item.run;
  TaskRun &tr = run.tasks[item.task];
  tr.state = GF_TASK_RUNNING;
  tr.worker = worker.index;
  tr.placement_epoch++;
  tr.estimate_s = 0;
  tr.attempts++;
  item.attempt = tr.attempts;
  run.attempts++;
  worker.running++;
  running_total_++;
  item.continued = false;
}

}  // namespace gf
