// Running successors directly: a worker thread runs a successor of its batch's tasks at once,
// without the scheduler's mutex, so that a chain's next link or a tree's sum costs no placement,
// queueing or picking, and no taking of the mutex of its own.
//
// The protocol.
// 1. Count down. Each task that succeeds on a thread allowed to (allow(): a CPU worker, granted,
//    with nobody watching each task start) publishes the buffers it made (RunState::made_buffers)
//    and then counts down the join count of each successor with several predecessors
//    (RunState::join_counts, acquire-release), whichever threads run the others.
// 2. Decide. The thread that counts a successor's last predecessor down (or finishes a sole
//    predecessor) may run it when it needs nothing beyond a CPU slot and host buffers its
//    predecessors made or the caller gave, would not overtake the task first in this worker's
//    queue when the batch was picked (the bar), and is a chain's next link, or is known to be
//    tiny while no other CPU thread spins (a spinning thread gets it through the scheduler
//    instead). It decides from what is immutable once a run started (the frozen graph, the run's
//    requests, bodies and sequence), the counts, the published buffers and the tiny flags.
// 3. Claim. Last, it takes the task's claim (TaskRun::claim). A cancel settling waiting tasks
//    takes the same claim: either the cancel leaves the task to the batch's report, or this
//    thread does not run it. A task whose body ran is never reported cancelled.
// 4. Adopt. When the scheduler completes the batch, it adopts each such task as started, right
//    after its predecessors in the same batch (Scheduler::adopt); one whose predecessors ran in
//    other threads' batches not yet reported is parked here until the last of them is
//    (Scheduler::park, adopt_parked); one that is not the scheduler's to adopt (its run failed
//    or was cancelled meanwhile) is dropped and made ready again the usual way.
// Only tasks that need nothing beyond a CPU slot and read host buffers qualify, so the ledger,
// device memory, transfers and spilling never see the difference.
#pragma once

#include <vector>

#include "scheduler/scheduling_lock.hpp"
#include "scheduler/task_attempt.hpp"
#include "scheduler/worker_state.hpp"

namespace gf {

class DirectRuns {
 public:
  // ---- worker threads, without the mutex ----
  // After item `done` of `batch` ran: steps 1 to 3 for its successors, appending to the batch
  // those this thread runs (the caller runs what was appended after the rest of the batch).
  static void after_success(const WorkerState &worker, Batch &batch, size_t done);

  // ---- the scheduler, under its mutex ----
  // What a batch just picked allows its thread: `may_continue` when the scheduler need not see
  // each of its tasks start.
  static void allow(const WorkerState &worker, Batch &batch, bool may_continue,
                    const Notifier &notifier) GF_REQUIRES(scheduling_lock);
  struct Parked {
    TaskAttempt item;
    uint32_t worker = 0;  // whose thread ran it
  };
  void park(TaskAttempt &&item, uint32_t worker) GF_REQUIRES(scheduling_lock);
  // Takes out the parked attempt of task t, if there is one.
  bool unpark(const RunState &run, TaskIndex t, Parked &out) GF_REQUIRES(scheduling_lock);
  bool any_parked() const GF_REQUIRES(scheduling_lock) { return !parked_.empty(); }

 private:
  // after_success()'s steps 2 and 3 for successor `s`, whose last predecessor was item
  // `done_index`.
  static void run_directly(const WorkerState &worker, Batch &batch, RunState &run, TaskIndex s,
                           size_t done_index, bool chain_link);

  // Few at a time: a join's predecessors finish on different threads at about the same time.
  std::vector<Parked> parked_ GF_GUARDED_BY(scheduling_lock);
};

}  // namespace gf
