// The scheduler's side of running successors directly (scheduler/direct_run.hpp): a successor a
// worker thread ran is adopted as started once its predecessors are all reported, parked until
// they are, or given back (dropped) when it turns out not to be the scheduler's to adopt.
#include "scheduler/scheduler.hpp"

namespace gf {

Scheduler::Adoption Scheduler::adopt(WorkerState &worker, TaskAttempt &item) {
  RunState &run = *item.run;
  TaskRun &tr = run.tasks[item.task];
  // Its predecessors, all completed by now (earlier in this batch, or in batches reported
  // before: it was parked until the last of them), succeeded and left it waiting for this (the
  // counts, the worker's checks and the claim see to that); anything else is not adopted.
  if (tr.state != GF_TASK_WAITING) return Adoption::kRefused;
  if (tr.remaining_deps != 0) return Adoption::kWaits;
  // What try_dispatch does for a task without resources on a CPU worker; it never sat in a
  // queue, so it was never counted in the worker's backlog.
  tr.state = GF_TASK_RUNNING;
  tr.worker = worker.index;
  tr.placement_epoch++;
  tr.estimate_s = 0;
  tr.attempts++;
  item.attempt = tr.attempts;
  run.attempts++;
  worker.running++;
  running_total_++;
  return Adoption::kAdopted;
}

void Scheduler::park(WorkerState &worker, TaskAttempt &item) {
  // Outputs are left to their consumer only within the completion of one batch: what a parked
  // task read is stored now, and what it made is stored when it is adopted, after this batch.
  store_left_inputs(*item.run, item);
  for (TaskAttempt::Output &output : item.outputs) output.read_in_batch = false;
  direct_.park(std::move(item), worker.index);
}

void Scheduler::adopt_parked(RunState &run, TaskIndex t, Deferred &deferred) {
  DirectRuns::Parked parked;
  if (!direct_.unpark(run, t, parked)) return;  // later in the batch being completed: adopted there
  WorkerState &ran_on = *workers_[parked.worker];
  if (adopt(ran_on, parked.item) != Adoption::kAdopted) {
    drop_continued(ran_on, parked.item, deferred);
    return;
  }
  finish(ran_on, &parked.item, 1, deferred);
}

void Scheduler::drop_continued(WorkerState &worker, TaskAttempt &item, Deferred &deferred) {
  RunState &run = *item.run;
  store_left_inputs(run, item);  // it runs again, reading them as any task does
  release_outputs(worker, item, deferred);
  // Still waiting: its predecessors' completions make it ready (or fail it) as for any task.
  TaskRun &tr = run.tasks[item.task];
  if (tr.state != GF_TASK_WAITING) return;
  tr.claim.give_back();
  if (tr.remaining_deps == 0) make_ready(run, item.task, worker.index, deferred);
}

}  // namespace gf
