// A run's end: cancelled (by its caller, or the pool shutting down), finished once its last task
// settles (published after the mutex is released), and retired once also released by its
// caller, when the scheduler frees what it still holds and lets go of it.
#include "scheduler/scheduler.hpp"

namespace gf {

void Scheduler::cancel(RunState &run) {
  Deferred deferred;
  {
    Lock lock(mu_);
    cancel_locked(run, "cancelled", deferred);
  }
  deferred.flush(backend_);
}

void Scheduler::cancel_locked(RunState &run, const char *reason, Deferred &deferred) {
  if (run.finished) return;
  run.cancel_requested.store(true, std::memory_order_relaxed);
  for (auto &w : workers_) {
    // (Called within remove_run, under the mutex.)
    w->ready.remove_run(&run,
                        [&](TaskIndex t) GF_NO_THREAD_SAFETY_ANALYSIS { unqueue(*w, run, t); });
    std::erase_if(w->fetching, [&](const TaskRef &ref) GF_REQUIRES(scheduling_lock) {
      if (ref.run != &run) return false;
      unqueue(*w, run, ref.task);
      return true;
    });
  }
  for (TaskIndex t = 0; t < run.tasks.size(); ++t) {
    TaskRun &tr = run.tasks[t];
    if (tr.state != GF_TASK_WAITING && tr.state != GF_TASK_QUEUED) continue;
    // A waiting task a worker has claimed ran already, or runs now, right after its last
    // predecessor (scheduler/continuation.cpp): it settles once that worker has reported its
    // batch and its predecessors are reported too (parked until then), as any task dispatched
    // before the cancel does.
    if (tr.state == GF_TASK_WAITING && !tr.claim.take()) continue;
    if (tr.state == GF_TASK_QUEUED) workers_[tr.worker]->backlog_s -= tr.estimate_s;
    run.set_error(t, reason);
    settle(run, t, GF_TASK_CANCELLED, deferred);
  }
}

void Scheduler::maybe_finish_run(RunState &run, Deferred &deferred) {
  if (run.tasks_left != 0 || run.finished) return;
  run.finished = true;
  run.finished_at = Clock::now();
  run.set_state(run.cancel_requested.load(std::memory_order_relaxed) ? GF_RUN_CANCELLED
                : run.failed > 0                                     ? GF_RUN_FAILED
                                                                     : GF_RUN_SUCCEEDED);
  auto it = runs_.find(&run);
  deferred.finished_runs.push_back(it->second);  // published after the mutex is released
  if (run.released) retire(run, deferred);
}

void Scheduler::release_run(RunState &run) {
  Deferred deferred;
  {
    Lock lock(mu_);
    if (!run.released && runs_.count(&run)) {
      run.released = true;
      cancel_locked(run, "cancelled", deferred);  // may finish, and so retire, the run
      if (run.finished) retire(run, deferred);
    }
  }
  deferred.flush(backend_);
}

void Scheduler::retire(RunState &run, Deferred &deferred) {
  auto it = runs_.find(&run);
  if (it == runs_.end()) return;
  for (DataIndex d = 0; d < run.data.size(); ++d) {
    if (run.data[d].phase == DataRun::Phase::kReady) memory_.free_data(run, d, deferred);
  }
  deferred.dropped_runs.push_back(std::move(it->second));
  runs_.erase(it);
}

}  // namespace gf
