// Idle workers taking ready tasks from the busiest queue, when moving their inputs costs less than
// waiting for that worker to get to them. Tasks known to be tiny move in bulk.
#include <algorithm>

#include "scheduler/batching.hpp"
#include "scheduler/scheduler.hpp"

namespace gf {

bool Scheduler::StealBudget::allows(size_t thief_has, size_t victim_has, size_t more_tasks,
                                    double more_seconds) const {
  return tasks + more_tasks < kLongBatch && seconds + more_seconds < limit_s &&
         thief_has < victim_has;
}

bool Scheduler::steal(WorkerState &thief, Deferred &deferred) {
  WorkerState *victim = nullptr;
  for (auto &w : workers_) {
    // A worker without its device's grant has idle threads but will not get to its queue.
    if (w.get() == &thief || (w->granted && notifier_.idle(w->index) > 0) || w->ready.empty()) {
      continue;
    }
    if (!victim || w->ready.size() > victim->ready.size()) victim = w.get();
  }
  if (!victim) return false;
  // Tasks known to be tiny move in bulk, up to half the victim's queue and a long batch's worth
  // of learnt time, so that a thief takes the mutex once per batch and not once per task (a wide
  // graph's roots all start on one worker: its siblings' group). Others move one at a time.
  StealBudget budget{batch_budget_s_};
  MovedAsQueued moved;
  while (!victim->ready.empty() && budget.allows(thief.ready.size(), victim->ready.size())) {
    if (!steal_one(thief, victim, deferred, moved, budget)) break;
  }
  if (moved.count) wake_after_queueing(thief, *moved.last.run, moved.last.task, moved.count);
  return budget.tasks > 0;
}

bool Scheduler::steal_one(WorkerState &thief, WorkerState *victim, Deferred &deferred,
                          MovedAsQueued &moved, StealBudget &budget) {
  const QueuedTask entry = victim->ready.top();
  RunState &run = *entry.run;
  const TaskDesc &task = run.graph().task(entry.task);
  const ResolvedRequest &r = run.requests[task.request];
  gf_task_fn fn = run.body(entry.task).for_kind(thief.kind);
  const auto &eligible = thief.kind == GF_WORKER_CPU ? r.cpu_workers : r.gpu_workers;
  if (!fn || std::find(eligible.begin(), eligible.end(), thief.index) == eligible.end()) {
    return false;
  }
  if (thief.space != kHostSpace &&
      !thief.memory.could_fit(r.request, memory_.task_device_bytes(run, entry.task))) {
    return false;
  }
  // Moving the inputs, and on another kind of worker running the body there, must cost less
  // than waiting for the victim to get to the task: an idle GPU worker must not take a task that
  // is quick on CPUs from a CPU worker that is merely busy for a moment, and run it slowly.
  double transfer = task.input_count ? memory_.transfer_seconds(run, entry.task, thief.space) : 0.0;
  double thief_cost = transfer;
  if (thief.kind != victim->kind) thief_cost += estimate(run, entry.task, thief.kind);
  if (victim->granted && thief_cost > 0 && thief_cost >= victim->backlog_s / victim->threads) {
    return false;
  }
  if (thief.kind == victim->kind && thief.space == kHostSpace && task.input_count == 0) {
    // Between CPU workers, with nothing to move or hold: the queue entry moves as it is (what
    // place() would do, less its wake: steal() wakes once). The estimate is read afresh, as
    // place() would: one learnt since the task was queued lets steal() take tiny tasks in bulk.
    // The tasks of a span are alike (ReadyQueue::push_following): as many of them move at once
    // as steal() would have taken one by one.
    const double estimate_s = estimate(run, entry.task, thief.kind);
    const size_t victim_left = victim->ready.size(), thief_has = thief.ready.size();
    uint32_t count = 1;
    while (count < entry.span &&
           budget.allows(thief_has + count, victim_left - count, count, count * estimate_s)) {
      ++count;
    }
    const QueuedTask taken = victim->ready.pop_span(count);
    for (uint32_t k = 0; k < count; ++k) {
      TaskRun &tr = run.tasks[taken.task + k];
      victim->backlog_s -= tr.estimate_s;
      queued_on(thief, tr, estimate_s);
    }
    thief.ready.push(taken);
    moved.last = last_of(taken);
    moved.count += count;
    budget.tasks += count;
    budget.seconds += count * estimate_s;
    return true;
  }
  victim->ready.pop();
  TaskRun &tr = run.tasks[entry.task];
  unqueue(*victim, run, entry.task);
  victim->backlog_s -= tr.estimate_s;
  // The task has been ready since it entered the victim's queue: its queue wait goes on (and
  // re-queueing it reads no clock).
  struct Stamp {
    Clock::time_point &stamp;
    ~Stamp() { stamp = {}; }  // under the mutex, which the caller holds throughout
  } stamp{enqueue_stamp_};
  enqueue_stamp_ = entry.ready_at;
  const double estimate_s = estimate(run, entry.task, thief.kind);
  place(run, entry.task, thief.index, estimate_s, deferred);
  budget.tasks++;
  budget.seconds += estimate_s;
  return true;
}

}  // namespace gf
