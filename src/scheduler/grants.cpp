// Grants: a connected pool runs tasks on a device only while the node's service has leased it
// to this process. Its lease agent (pool/lease_agent.*) turns the grants on and off here; the
// scheduler only refuses to start tasks on a worker without one, and lets granted workers steal
// what waits there.
#include "scheduler/scheduler.hpp"

namespace gf {

void Scheduler::grant(uint32_t w) {
  Lock lock(mu_);
  WorkerState &worker = *workers_.at(w);
  worker.granted = true;
  notifier_.wake_all(worker.index);
}

uint32_t Scheduler::ungrant(uint32_t w) {
  Lock lock(mu_);
  WorkerState &worker = *workers_.at(w);
  const bool was_granted = worker.granted;
  worker.granted = false;
  if (was_granted && !worker.ready.empty()) {
    for (auto &other : workers_) {  // idle granted workers may take over what waits here
      if (other.get() != &worker && other->granted && notifier_.idle(other->index) > 0) {
        notifier_.wake_one(other->index);
      }
    }
  }
  return worker.running;
}

bool Scheduler::has_work(uint32_t w) {
  Lock lock(mu_);
  const WorkerState &worker = *workers_.at(w);
  return !worker.ready.empty() || !worker.fetching.empty() || worker.running > 0;
}

void Scheduler::fail_placed(uint32_t w, const std::string &reason) {
  Deferred deferred;
  {
    Lock lock(mu_);
    WorkerState &worker = *workers_.at(w);
    while (!worker.ready.empty()) {
      const QueuedTask entry = worker.ready.pop();
      unqueue(worker, *entry.run, entry.task);
      worker.backlog_s -= entry.run->tasks[entry.task].estimate_s;
      fail_task(*entry.run, entry.task, "could not run on " + worker.name + ": " + reason,
                deferred);
    }
    while (!worker.fetching.empty()) {
      const TaskRef ref = worker.fetching.back();
      worker.fetching.pop_back();
      ref.run->tasks[ref.task].placement_epoch++;  // copies still on their way find it gone
      unqueue(worker, *ref.run, ref.task);
      worker.backlog_s -= ref.run->tasks[ref.task].estimate_s;
      fail_task(*ref.run, ref.task, "could not run on " + worker.name + ": " + reason, deferred);
    }
  }
  deferred.flush(backend_);
}

}  // namespace gf
