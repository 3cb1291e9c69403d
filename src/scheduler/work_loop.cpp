// A worker thread's loop, the scheduler's side: its last batch reported and settled, then its
// next picked or stolen, under one taking of the mutex; with nothing to do, it spins, then
// sleeps (notifier.hpp).
#include "scheduler/scheduler.hpp"

namespace gf {
namespace {

// How many items from batch.items[first] on are successes of tasks of one run and one cost key,
// settled together (Scheduler::finish): a span pick() took from a ready queue, tasks of one
// request, a chain's links run directly (run_directly, counted only while `continued_too`).
// A task that repeats the one before it (Graph::repeats_previous) shares its key without a look at
// its description. 0 when fewer than two are.
size_t successes_in_a_row(const Batch &batch, size_t first, bool continued_too) {
  auto settles_here = [continued_too](const TaskAttempt &d) {
    return d.succeeded() && (continued_too || !d.run_directly);
  };
  const TaskAttempt &head = batch.items[first];
  if (first + 1 >= batch.count || !settles_here(head)) return 0;
  const Graph &graph = head.run->graph();
  const uint32_t key = graph.task(head.task).cost_key;
  size_t end = first + 1;
  while (end < batch.count) {
    const TaskAttempt &d = batch.items[end];
    if (d.run != head.run || !settles_here(d)) break;
    const bool alike = d.task == batch.items[end - 1].task + 1 && graph.repeats_previous(d.task);
    if (!alike && graph.task(d.task).cost_key != key) break;
    ++end;
  }
  return end - first > 1 ? end - first : 0;
}

}  // namespace

void Scheduler::complete_batch(WorkerState &worker, Batch &batch, Deferred &deferred) {
  // This thread picks again right after: work it makes ready for itself wakes nobody else.
  notifier_.completing_worker = worker.index;
  bool dropping = false;  // after a successor run directly that could not be adopted
  for (size_t i = 0; i < batch.count; ++i) {
    TaskAttempt &item = batch.items[i];
    if (item.outcome == TaskAttempt::Outcome::kHandedOff) {
      item.outcome = TaskAttempt::Outcome::kPending;
      continue;
    }
    // A successor run directly: its predecessors that ran in this batch were completed above
    // and left it to be adopted here (succeed() skips claimed tasks). One whose predecessors
    // ran on other threads too waits for their reports (park).
    if (item.run_directly) {
      item.run_directly = false;
      const Adoption adoption = dropping ? Adoption::kRefused : adopt(worker, item);
      if (adoption == Adoption::kWaits) {
        park(worker, item);
        continue;
      }
      if (adoption == Adoption::kRefused) {
        drop_continued(worker, item, deferred);
        dropping = true;  // what ran after it may have read what it made: drop that too
        continue;
      }
    }
    const size_t row = successes_in_a_row(batch, i, !dropping);
    i += finish(worker, &item, row ? row : 1, deferred) - 1;
  }
  notifier_.completing_worker = kNoIndex;
  batch.count = 0;
}

void Scheduler::prefetch_data_settling(const TaskAttempt &item) {
  if (item.outcome == TaskAttempt::Outcome::kHandedOff) return;
  const RunState &run = *item.run;
  const Graph &graph = run.graph();
  const TaskDesc &task = graph.task(item.task);
  __builtin_prefetch(&run.tasks[item.task], 1);
  auto data_state = [&](DataIndex d) GF_NO_THREAD_SAFETY_ANALYSIS {
    const char *state = reinterpret_cast<const char *>(&run.data[d]);
    __builtin_prefetch(state, 1);
    __builtin_prefetch(state + sizeof(DataRun) - 1, 1);
  };
  const DataIndex *out = graph.outputs(task);
  for (uint32_t o = 0; o < task.output_count; ++o) data_state(out[o]);
  const DataIndex *in = graph.inputs(task);
  for (uint32_t k = 0; k < task.input_count; ++k) data_state(in[k]);
  const GraphAnalysis &a = graph.analysis();
  for (uint32_t e = a.successor_begin[item.task]; e < a.successor_begin[item.task + 1]; ++e) {
    __builtin_prefetch(&run.tasks[a.successors[e]], 1);
  }
}

void Scheduler::retire_thread(WorkerState &worker, Batch &batch, Deferred &deferred) {
  Lock lock(mu_);
  complete_batch(worker, batch, deferred);
  if (!worker.ready.empty() || !worker.fetching.empty()) notifier_.wake_all(worker.index);
}

bool Scheduler::next_batch(WorkerState &worker, Batch &batch, Deferred &deferred) {
  // CPU workers only: they hand the mutex back and forth every few microseconds on graphs of
  // tiny tasks. Device workers' tasks are longer, and on a busy machine (a connected pool and its
  // service on two vCPUs) their spinning took the CPU from the threads they waited on: connected
  // trees ran 0.85x.
  const bool cpu = worker.kind == GF_WORKER_CPU;
  Lock lock(mu_, Lock::Spinning{cpu ? lock_pauses_ : 0});
  complete_batch(worker, batch, deferred);
  bool may_spin = cpu && worker.granted;
  for (;;) {
    if (stopping_) return false;
    if (worker.memory.take_released()) retry_memory_blocked(worker, deferred);
    if (worker.granted && pick(worker, batch, deferred)) return true;
    if (worker.granted && steal(worker, deferred)) continue;
    if (!deferred.empty()) return true;  // flush outside the mutex before sleeping
    if (running_total_ == 0 && memory_.moving() == 0) fail_stuck_on_memory(deferred);
    if (!deferred.empty()) return true;
    // Nothing to do: spin a while, then sleep (scheduler/notifier.hpp).
    if (may_spin) {
      may_spin = notifier_.spin(worker.index, cpu, lock_pauses_, lock);  // look again either way
      continue;
    }
    notifier_.sleep(worker.index, cpu, lock);
    may_spin = cpu && worker.granted;
  }
}

}  // namespace gf
