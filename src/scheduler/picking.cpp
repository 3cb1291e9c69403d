// The choice of a worker's next tasks: what fits its resources now, in queue order, batched
// when cheap (so the mutex is taken once per batch), and started as one step for one task or a
// span of alike ones. On a CPU worker, tasks of one run with one request join a batch too: its
// thread runs them one after another, so the request charged for the first covers each in turn
// (TaskAttempt::holds_request), and the ledger is exact at every instant.
#include <algorithm>

#include "core/error.hpp"
#include "scheduler/batching.hpp"
#include "scheduler/scheduler.hpp"

namespace gf {

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
  // The request the batch's first task was charged, which later ones of its run may share.
  const RunState *&charged_run = batch.charged_run;
  RequestId &charged = batch.charged_request;
  charged_run = nullptr;
  charged = kEmptyRequest;
  for (int scanned = 0; !worker.ready.empty() && batch.count < kLongBatch;) {
    const QueuedTask &top = worker.ready.top();
    const RunState &run = *top.run;
    const TaskDesc &task = run.graph().task(top.task);
    const bool cheap =
        task.request == kEmptyRequest &&
        (worker.space == kHostSpace || declared_output_bytes(run.graph(), task) == 0);
    const bool shares = charged_run == &run && task.request == charged;
    if (cheap_only && !cheap && !shares) break;
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
    if (try_dispatch(worker, top, estimate_s, batch.items[batch.count], deferred, first_in_line,
                     shares)) {
      const QueuedTask first = worker.ready.pop();
      batch.count++;
      if (!cheap && !shares) {
        // A task holding resources does not wait behind others; on a device it holds memory
        // too, and goes alone.
        if (batch.count > 1 || worker.space != kHostSpace) break;
        charged_run = &run;
        charged = task.request;
      }
      cheap_only = true;
      // Whether the batch is long enough after its latest task (of the entry's estimate), with
      // `left` tasks still queued here.
      auto full = [&](size_t left) GF_REQUIRES(scheduling_lock) {
        batch_estimate += estimate_s;
        const bool tiny = batch_estimate < batch_budget_s_;
        // Leave the tail for other workers to steal: all of it unless the batch is known to be
        // tiny, and half of what was queued while a worker is idle (a thief takes half a
        // queue), rather than one tiny task at a time whenever any thread idles, which would make
        // most batches of a wide pool one task long.
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
                             TaskAttempt &out, Deferred &deferred, bool first_in_line,
                             bool shares_charge) {
  RunState &run = *entry.run;
  const Graph &graph = run.graph();
  const TaskDesc &task = graph.task(entry.task);
  const ResolvedRequest &r = run.requests[task.request];
  const bool device = worker.space != kHostSpace;
  uint64_t output_bytes = device ? declared_output_bytes(graph, task) : 0;
  if (!shares_charge && (!r.request.empty() || output_bytes)) {
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
  out.holds_request = !shares_charge;
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
    out[i].holds_request = false;  // a span's: covered by its first task's charge
  }
  run.attempts += count;
  worker.running += count;
  running_total_ += count;
}

}  // namespace gf
