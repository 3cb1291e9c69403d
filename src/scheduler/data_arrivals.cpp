// Copies and spills that ended, on backend threads: the mutex is taken, Memory records where the
// data is now, and the tasks that were waiting for it are queued (their inputs all there) or fail
// (the copy failed, or the data was released meanwhile).
#include "scheduler/scheduler.hpp"

namespace gf {

void Scheduler::transfer_done(const std::shared_ptr<RunState> &run, DataIndex d, SpaceId from,
                              SpaceId to, void *ptr, const std::string &error,
                              Clock::time_point began) {
  Deferred deferred;
  {
    Lock lock(mu_);
    std::vector<Memory::Arrival> arrivals;
    memory_.transfer_arrived(run, d, from, to, ptr, error, began, deferred, arrivals);
    for (Memory::Arrival &arrival : arrivals) {
      WorkerState &worker = *workers_[arrival.worker];
      RunState &of = *arrival.task.run;
      if (arrival.error.empty()) {
        enqueue_ready(worker, of, arrival.task.task);
        continue;
      }
      unqueue(worker, of, arrival.task.task);
      worker.backlog_s -= of.tasks[arrival.task.task].estimate_s;
      fail_task(of, arrival.task.task, std::move(arrival.error), deferred);
    }
    wake_if_quiet();
  }
  deferred.flush(backend_);
}

void Scheduler::spill_done(const std::shared_ptr<RunState> &run, DataIndex d, SpaceId space,
                           void *host, const std::string &error, Clock::time_point began) {
  Deferred deferred;
  {
    Lock lock(mu_);
    memory_.spill_arrived(run, d, space, host, error, began, deferred);
    wake_if_quiet();
  }
  deferred.flush(backend_);
}

void Scheduler::retry_memory_blocked(WorkerState &worker, Deferred &deferred) {
  std::vector<TaskRef> arrived;
  memory_.retry_memory_blocked(worker, deferred, arrived);
  for (const TaskRef &ref : arrived) enqueue_ready(worker, *ref.run, ref.task);
}

void Scheduler::wake_if_quiet() {
  if (memory_.moving() == 0 && running_total_ == 0) {
    for (auto &w : workers_) notifier_.wake_all(w->index);
  }
}

}  // namespace gf
