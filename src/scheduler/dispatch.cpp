// Handing tasks to worker threads: picking what fits, batching cheap tasks, stealing when idle,
// and failing tasks that can never fit once the whole pool has gone quiet.
#include <algorithm>

#include "core/error.hpp"
#include "scheduler/scheduler.hpp"

namespace gf {
namespace {

// Tasks without resources or device outputs are handed out up to kMaxBatch at a time, so the
// mutex is taken once per batch rather than once per task; up to kLongBatch while the batch's
// learnt durations add up to less than the scheduler's batch budget (batch_budget_for), so that
// tasks known to be tiny take it far less often (tasks not yet learnt count kUnknownDuration:
// they stay in batches of kMaxBatch).
constexpr size_t kMaxBatch = 8;
constexpr size_t kLongBatch = 64;
// How far down its queue a worker looks for a task that fits while the first ones do not.
constexpr int kScanDepth = 8;

uint64_t declared_output_bytes(const Graph &graph, const TaskDesc &task) {
  uint64_t bytes = 0;
  const DataIndex *out = graph.outputs(task);
  for (uint32_t i = 0; i < task.output_count; ++i) {
    const DataDesc &d = graph.data(out[i]);
    if (d.kind == DataKind::kBuffer) bytes += d.size;
  }
  return bytes;
}

// How many items from batch.items[first] on are successful attempts of consecutive tasks of one
// run, each after the first alike the one before it (Graph::alike_previous): a span pick() took
// from a ready queue, or a chain's links run directly (`continued`, counted only while
// `continued_too`). 0 when fewer than two are.
size_t alike_successes(const Batch &batch, size_t first, bool continued_too) {
  auto settles_here = [continued_too](const TaskAttempt &d) {
    return d.succeeded() && (continued_too || !d.run_directly);
  };
  const TaskAttempt &head = batch.items[first];
  if (first + 1 >= batch.count || !head.run->graph().has_alike_tasks() || !settles_here(head)) {
    return 0;
  }
  const Graph &graph = head.run->graph();
  size_t end = first + 1;
  while (end < batch.count) {
    const TaskAttempt &d = batch.items[end];
    if (d.run != head.run || d.task != batch.items[end - 1].task + 1 ||
        !graph.alike_previous(d.task) || !settles_here(d)) {
      break;
    }
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
    const size_t alike = alike_successes(batch, i, !dropping);
    i += finish(worker, &item, alike ? alike : 1, deferred) - 1;
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
  auto data_state = [&](DataIndex d) {
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
      may_spin = notifier_.spin(worker.index, cpu, lock);  // look again either way
      continue;
    }
    notifier_.sleep(worker.index, cpu, lock);
    may_spin = cpu;
  }
}

bool Scheduler::pick(WorkerState &worker, Batch &batch, Deferred &deferred) {
  if (worker.ready.empty()) return false;
  std::vector<QueuedTask> &passed_over = batch.passed_over;
  passed_over.clear();
  bool cheap_only = false;
  // Set once the first task in line could not start here: the room its try made (spilling the
  // inputs other queued tasks hold) is its own. A task behind it that lost an input must not
  // fetch it back into that room now, or the two push each other out for as long as the timing
  // lets them (measured: 100 MiB of blocks copied 19 GiB).
  bool first_waits = false;
  double batch_estimate = 0;
  const size_t queued = worker.ready.size();
  for (int scanned = 0; !worker.ready.empty() && batch.count < kLongBatch;) {
    const QueuedTask &top = worker.ready.top();
    const RunState &run = *top.run;
    const TaskDesc &task = run.graph().task(top.task);
    bool cheap = task.request == kEmptyRequest &&
                 (worker.space == kHostSpace || declared_output_bytes(run.graph(), task) == 0);
    if (cheap_only && !cheap) break;
    if (task.input_count && worker.space != kHostSpace &&
        memory_.transfer_seconds(run, top.task, worker.space) > 0) {
      // An input was spilled off this device after the task was queued: fetch it again, once
      // no task ahead of it waits for room.
      if (first_waits) {
        if (++scanned >= kScanDepth) break;
        passed_over.push_back(worker.ready.pop());
        continue;
      }
      QueuedTask entry = worker.ready.pop();  // still placed here: its inputs stay held
      TaskRun &tr = entry.run->tasks[entry.task];
      tr.placement_epoch++;
      memory_.fetch_inputs(worker, *entry.run, entry.task, deferred);
      worker.fetching.push_back(TaskRef{entry.run, entry.task});
      continue;
    }
    if (batch.count == batch.items.size()) batch.items.emplace_back();
    bool first_in_line = batch.count == 0 && passed_over.empty();
    const uint32_t alike = top.span - 1;  // read first: `top` is not read after try_dispatch
    const float estimate_s = estimate_at_start(worker, top);
    if (try_dispatch(worker, top, estimate_s, batch.items[batch.count], deferred, first_in_line)) {
      const QueuedTask first = worker.ready.pop();
      batch.count++;
      // Only cheap tasks join a batch: a task holding resources should not wait behind others.
      if (!cheap) break;
      cheap_only = true;
      // Whether the batch is long enough after its latest task (of the entry's estimate), with
      // `left` tasks still queued here.
      auto full = [&](size_t left) {
        batch_estimate += estimate_s;
        const bool tiny = batch_estimate < batch_budget_s_;
        // Leave the tail for other workers to steal: all of it unless the batch is known to be
        // tiny, and half of what was queued while a worker is idle (a thief takes half a
        // queue). Taking one tiny task at a time whenever any thread idled made most of a
        // tree's batches at 16 workers one task long: seven times the picks per task of 2
        // workers (issue 29).
        if (left < 4 * kMaxBatch &&
            (!tiny || (notifier_.idle_total() > 0 && batch.count * 2 >= queued))) {
          return true;
        }
        return batch.count >= kLongBatch || (batch.count >= kMaxBatch && !tiny);
      };
      size_t left = worker.ready.size();
      if (full(left)) break;
      // The rest of its span is alike (ReadyQueue::push_following): dispatched as it was,
      // without being weighed again, and taken from the queue at once.
      const size_t from = batch.count;
      uint32_t taken = 0;
      bool stop = false;
      while (taken < alike && !stop) {
        ++taken;
        batch.count++;
        stop = full(--left);
      }
      if (taken > 0) {
        if (batch.items.size() < batch.count) batch.items.resize(batch.count);
        started(worker, *first.run, first.task + 1, taken, first.ready_at, estimate_s,
                &batch.items[from]);
        if (worker.ready.pop_span(taken).task != first.task + 1) {
          fail(GF_ERR_INTERNAL, "a ready queue's span broke");
        }
      }
      if (stop) break;
    } else {
      first_waits |= first_in_line && worker.space != kHostSpace;
      if (cheap_only || ++scanned >= kScanDepth) break;
      passed_over.push_back(worker.ready.pop());
    }
  }
  for (const QueuedTask &entry : passed_over) worker.ready.push(entry);
  if (batch.count == 0) return false;
  worker.batches++;
  // Not where the scheduler must see each task start: a connected pool's worker runs tasks only
  // while it holds its grant, and observers measure each task's queue wait.
  DirectRuns::allow(
      worker, batch,
      worker.granted && !demand_listener_ && observers_.load(std::memory_order_relaxed) == 0,
      notifier_);
  return true;
}

float Scheduler::estimate_at_start(const WorkerState &worker, const QueuedTask &entry) const {
  const float queued = entry.run->tasks[entry.task].estimate_s;
  if (queued != static_cast<float>(kUnknownDuration)) return queued;
  // Without this, a new graph's first run kept batches of kMaxBatch and timed every task: a tree
  // of 131,072 tiny leaves ran its first time 4.7 times slower than its second.
  return static_cast<float>(estimate(*entry.run, entry.task, worker.kind));
}

bool Scheduler::try_dispatch(WorkerState &worker, const QueuedTask &entry, float estimate_s,
                             TaskAttempt &out, Deferred &deferred, bool first_in_line) {
  RunState &run = *entry.run;
  const Graph &graph = run.graph();
  const TaskDesc &task = graph.task(entry.task);
  const ResolvedRequest &r = run.requests[task.request];
  const bool device = worker.space != kHostSpace;
  uint64_t output_bytes = device ? declared_output_bytes(graph, task) : 0;
  if (!r.request.empty() || output_bytes) {
    if (device ? !worker.memory.fits_now(r.request, output_bytes)
               : !worker.ledger.fits_now(r.request)) {
      if (device) {  // make room: spill what no running task reads
        if (uint64_t short_by = worker.memory.shortfall(r.gpu_memory, output_bytes)) {
          // The first task in line may push out data that later queued tasks hold, but never
          // its own inputs (counted as in use while the victims are chosen). Nothing moves
          // unless that makes room: a task that must wait for running tasks to end anyway
          // would only push out what the tasks behind it are about to use.
          memory_.make_room_for(worker, run, entry.task, short_by, first_in_line, deferred);
        }
      }
      return false;
    }
    worker.ledger.acquire(r.request);
    if (device) worker.memory.requested_bytes += whole_bytes(r.gpu_memory);
    if (output_bytes) {
      if (!worker.memory.reserve(output_bytes)) {
        fail(GF_ERR_INTERNAL, "device memory refused outputs it had just admitted");
      }
      memory_.spill(worker, 0, deferred);
    }
  }
  started(worker, run, entry.task, 1, entry.ready_at, estimate_s, &out);
  const DataIndex *in = graph.inputs(task);
  for (uint32_t i = 0; i < task.input_count; ++i) {
    DataRun &data = run.data[in[i]];
    if (graph.data(in[i]).kind == DataKind::kValue) {
      // Read by the task from now on: never moved while it runs (a CPU task reads whichever
      // form is current; a task on a device its own form there, when it has one).
      data.uses++;
      const Replica *here = worker.space != kHostSpace ? data.replica_in(worker.space) : nullptr;
      out.inputs[i] = {here ? here->ptr : data.value, data.size};
      if (worker.space != kHostSpace) {
        data.holds--;
        if (here && here->value && data.value_movable())
          memory_.note_resident(run, in[i], worker.space);
      }
      continue;
    }
    const Replica *replica = data.replica_in(worker.space);
    if (!replica) fail(GF_ERR_INTERNAL, "dispatched a task whose input is not in place");
    out.inputs[i] = {replica->ptr, data.size};
    if (worker.space != kHostSpace) {
      data.holds--;  // queued -> running: now it may not be spilled at all
      data.uses++;
      memory_.note_resident(run, in[i], worker.space);
    }
  }
  return true;
}

void Scheduler::started(WorkerState &worker, RunState &run, TaskIndex first, uint32_t count,
                        Clock::time_point ready_at, float estimate_s, TaskAttempt *out) {
  const bool tiny = estimate_s < kTinyTask;
  // Room for its inputs, which try_dispatch fills in; the alike tasks of a span have none.
  const uint32_t inputs = count == 1 ? run.graph().task(first).input_count : 0;
  for (uint32_t i = 0; i < count; ++i) {
    TaskRun &tr = run.tasks[first + i];
    if (tr.estimate_s != estimate_s) {  // what it takes off the backlog when it ends
      worker.backlog_s += static_cast<double>(estimate_s) - tr.estimate_s;
      tr.estimate_s = estimate_s;
    }
    tr.state = GF_TASK_RUNNING;
    tr.attempts++;
    out[i].assign(&run, first + i, tr.attempts, inputs, ready_at, tiny);
  }
  run.attempts += count;
  worker.running += count;
  running_total_ += count;
}

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

void Scheduler::fail_stuck_on_memory(Deferred &deferred) {
  // Nothing runs and nothing moves anywhere, so nothing will free device memory: a task at the
  // head of a device's queue that does not fit now, even after spilling, never will. Fail it
  // rather than hang.
  for (auto &w : workers_) {  // memory freed since a worker last looked may unblock its tasks
    if (w->memory.take_released()) retry_memory_blocked(*w, deferred);
  }
  if (memory_.moving() > 0) return;  // those copies will change the picture
  for (auto &w : workers_) {
    if (w->space == kHostSpace) continue;  // without running tasks, host resources are all free
    while (!w->ready.empty()) {
      const QueuedTask entry = w->ready.top();
      RunState &run = *entry.run;
      const TaskDesc &task = run.graph().task(entry.task);
      const ResolvedRequest &r = run.requests[task.request];
      uint64_t outputs = declared_output_bytes(run.graph(), task);
      if (w->memory.fits_now(r.request, outputs)) break;
      uint64_t short_by = w->memory.shortfall(r.gpu_memory, outputs);
      const uint64_t moving = memory_.make_room_for(*w, run, entry.task, short_by, true, deferred);
      if (moving > 0) break;
      w->ready.pop();
      unqueue(*w, run, entry.task);
      w->backlog_s -= run.tasks[entry.task].estimate_s;
      uint64_t free = w->memory.free();
      fail_task(run, entry.task,
                "out of memory: " + run.graph().task_label(entry.task) + " needs " +
                    std::to_string(static_cast<uint64_t>(r.gpu_memory.to_double())) +
                    " bytes of gpu_memory plus " + std::to_string(outputs) +
                    " bytes of outputs on " + w->name + ", which has " + std::to_string(free) +
                    " bytes free; the rest is held by data no running task will release",
                deferred);
    }
    // Tasks whose inputs wait for memory: the oldest may push out inputs that later tasks hold
    // (never its own); the others wait for it, so two tasks never evict each other's inputs.
    bool retry = false, spilling_for_one = false;
    for (size_t i = 0; i < w->fetching.size();) {
      TaskRef ref = w->fetching[i];
      TaskRun &tr = ref.run->tasks[ref.task];
      if (!tr.memory_blocked) {
        ++i;
        continue;
      }
      uint64_t missing = 0;
      const Graph &graph = ref.run->graph();
      const DataIndex *in = graph.inputs(graph.task(ref.task));
      for (uint32_t k = 0; k < graph.task(ref.task).input_count; ++k) {
        const DataRun &data = ref.run->data[in[k]];
        if (memory_.needs_move(*ref.run, in[k], w->space)) {
          missing = std::min(missing + data.size, FixedPoint::kMaxBytes + 1);
        }
      }
      uint64_t free = w->memory.free();
      uint64_t short_by = missing > free ? missing - free : 0;
      if (short_by == 0 || spilling_for_one) {
        retry = retry || short_by == 0;
        ++i;
        continue;
      }
      const uint64_t moving =
          memory_.make_room_for(*w, *ref.run, ref.task, short_by, true, deferred);
      if (moving > 0) {
        retry = spilling_for_one = true;  // room once the spill copies land
        ++i;
        continue;
      }
      w->fetching[i] = w->fetching.back();
      w->fetching.pop_back();
      unqueue(*w, *ref.run, ref.task);
      w->backlog_s -= tr.estimate_s;
      fail_task(*ref.run, ref.task,
                "out of memory: the inputs of " + ref.run->graph().task_label(ref.task) +
                    " do not fit on " + w->name + " next to the data held there",
                deferred);
    }
    if (w->memory.take_released() || retry) retry_memory_blocked(*w, deferred);
  }
}

}  // namespace gf
