// The worker-thread side of running successors directly (scheduler/direct_run.hpp), and the
// scheduler's list of those parked until their predecessors are reported.
#include "scheduler/direct_run.hpp"

#include <algorithm>
#include <array>

#include "scheduler/notifier.hpp"

namespace gf {
namespace {

// How many tasks a batch may hold with the successors its thread adds before it reports back:
// a batch of 64 tiny tasks and the 63 sums of a binary tree over them, so progress and
// estimates stay about as fresh as a long batch's (dispatch.cpp's kLongBatch).
constexpr size_t kMaxBatchWithContinued = 128;

// Where input `k` of task `s` is: given by the caller, or made by one of its predecessors, in
// this batch (items before `end`, searched from the task just finished back: a successor's
// inputs are mostly made by the tasks that ran last) or by a thread that published it before
// counting `s` down (RunState::join_counts). Values are counted as in use at dispatch: a task
// reading one is not run directly. `from_batch` is the output it was found in, if in this batch.
bool find_input(Batch &batch, size_t end, const RunState &run, TaskIndex s, uint32_t k,
                std::pair<const void *, uint64_t> &out, TaskAttempt::Output *&from_batch) {
  from_batch = nullptr;
  const Graph &graph = run.graph();
  const DataIndex d = graph.inputs(graph.task(s))[k];
  const DataDesc &desc = graph.data(d);
  if (desc.kind != DataKind::kBuffer) return false;
  if (desc.origin == DataOrigin::kHostBuffer) {
    out = {desc.host_bytes, desc.size};
    return true;
  }
  if (desc.origin != DataOrigin::kProduced) return false;
  for (size_t i = end; i-- > 0;) {
    TaskAttempt &item = batch.items[i];
    if (item.run != &run || item.task != desc.producer) continue;
    const TaskDesc &producer = graph.task(desc.producer);
    const DataIndex *made = graph.outputs(producer);
    for (uint32_t o = 0; o < producer.output_count; ++o) {
      if (made[o] != d) continue;
      out = {item.outputs[o].ptr, item.outputs[o].size};
      from_batch = &item.outputs[o];
      return true;
    }
    return false;
  }
  if (!run.made_buffers) return false;  // a graph without joins publishes nothing
  out = {run.made_buffers[d].ptr, run.made_buffers[d].size};
  return true;
}

// Publishes the buffers `done` made, for successors that other threads may run at once.
void publish_outputs(RunState &run, const TaskAttempt &done) {
  const Graph &graph = run.graph();
  const TaskDesc &task = graph.task(done.task);
  const DataIndex *out = graph.outputs(task);
  for (uint32_t o = 0; o < task.output_count; ++o) {
    if (graph.data(out[o]).kind != DataKind::kBuffer) continue;
    run.made_buffers[out[o]] = {done.outputs[o].ptr, done.outputs[o].size};
  }
}

// Whether task `s` may run on this CPU worker with nothing but a CPU slot, or under the request
// the batch's first task was charged (picking.cpp), which covers each of the batch's tasks in
// turn. Asked for every successor of every task the batch runs: whether this worker takes tasks
// without a request is looked up once per batch and run.
bool runs_plainly_here(const WorkerState &worker, Batch &batch, const RunState &run, TaskIndex s) {
  const TaskDesc &task = run.graph().task(s);
  if (task.request != kEmptyRequest && batch.charged_run == &run &&
      task.request == batch.charged_request) {
    const TaskBody &body = run.body(s);
    return body.cpu_fn && !body.gpu_fn;
  }
  if (!run.needs_only_cpu(s)) return false;
  if (batch.plain_run != &run) {
    const std::vector<uint32_t> &eligible = run.requests[kEmptyRequest].cpu_workers;
    batch.plain_run = &run;
    batch.plain_here = std::find(eligible.begin(), eligible.end(), worker.index) != eligible.end();
  }
  return batch.plain_here;
}

}  // namespace

void DirectRuns::allow(const WorkerState &worker, Batch &batch, bool may_continue,
                       const Notifier &notifier) {
  batch.may_continue = may_continue && worker.kind == GF_WORKER_CPU;
  batch.notifier = &notifier;
  batch.has_bar = batch.may_continue && !worker.ready.empty();
  if (batch.has_bar) batch.bar = worker.ready.top();
  batch.plain_run = nullptr;  // a run of an earlier batch may have ended since
}

void DirectRuns::after_success(const WorkerState &worker, Batch &batch, size_t done_index) {
  if (!batch.may_continue) return;
  const TaskAttempt &done = batch.items[done_index];
  // (An output it did not set failed it already, in Worker::execute: its successors must not
  // run, as it may be retried.) Nothing is counted down for a task that did not succeed here:
  // its successors become ready, or fail, the usual way.
  if (!done.succeeded()) return;
  RunState &run = *done.run;
  if (run.cancel_requested.load(std::memory_order_relaxed)) return;
  const GraphAnalysis &a = run.graph().analysis();
  const TaskIndex finished = done.task;
  const uint32_t first = a.successor_begin[finished], last = a.successor_begin[finished + 1];
  if (first == last) return;
  // A sole successor of a sole predecessor is a chain's next link, run whatever it costs: it
  // could only start after this task anyway, and has nothing to count.
  if (last - first == 1 && a.predecessor_count[a.successors[first]] == 1) {
    if (batch.count < kMaxBatchWithContinued) {
      run_directly(worker, batch, run, a.successors[first], done_index, true);
    }
    return;
  }
  bool published = false;
  for (uint32_t e = first; e < last; ++e) {
    const TaskIndex s = a.successors[e];
    // Every edge is counted down (edges counted as often as the graph lists them, the same on
    // both sides), whatever is done with the successor: ready once the last of its predecessors
    // has succeeded, here or on another thread, before it reported. A successor of this task
    // alone (a fan-out's branch) needs no count, nor one whose other predecessors all counted
    // already: this thread is its last, and reads what this task made from the batch. Otherwise
    // another thread may be, and reads it from what is published.
    if (a.predecessor_count[s] > 1 && !run.join_count(s).is_last()) {
      if (!published && run.graph().task(finished).output_count) {
        publish_outputs(run, batch.items[done_index]);  // (`done` may have moved)
      }
      published = true;
      if (!run.join_count(s).count_down()) continue;
    }
    if (batch.count < kMaxBatchWithContinued)
      run_directly(worker, batch, run, s, done_index, false);
  }
}

void DirectRuns::run_directly(const WorkerState &worker, Batch &batch, RunState &run, TaskIndex s,
                              size_t done_index, bool chain_link) {
  // Other successors than a chain's links run here only when known to be tiny, so that a
  // fan-out of long tasks still spreads over the workers.
  const TaskDesc &task = run.graph().task(s);
  const bool tiny = run.tiny_costs[task.cost_key].load(std::memory_order_relaxed);
  if (!chain_link && (!tiny || batch.notifier->spinning_cpu_threads() > 0)) return;
  if (!runs_plainly_here(worker, batch, run, s)) return;
  // Priorities and graph order: it must not overtake what was first in this worker's queue
  // when the batch was picked (tasks queued later wait for the batch, as they would anyway).
  const GraphAnalysis &a = run.graph().analysis();
  if (batch.has_bar &&
      runs_later(QueuedTask{task.priority, a.order[s], run.sequence, nullptr, {}, s}, batch.bar)) {
    return;
  }
  if (batch.count == batch.items.size()) batch.items.emplace_back();
  TaskAttempt &next = batch.items[batch.count];  // the task just finished may have moved
  next.inputs.resize(task.input_count);
  // The outputs of this batch it reads (the first few): marked once it runs, so that the
  // scheduler may leave their bytes to it (DataRun::Phase::kLeftToConsumer).
  std::array<TaskAttempt::Output *, 4> read_here;  // (a chain's links mostly read nothing)
  const auto marked = std::min(task.input_count, static_cast<uint32_t>(read_here.size()));
  bool inputs_here = true;
  for (uint32_t k = 0; k < task.input_count && inputs_here; ++k) {
    TaskAttempt::Output *from_batch = nullptr;
    inputs_here = find_input(batch, done_index + 1, run, s, k, next.inputs[k], from_batch);
    if (k < marked) read_here[k] = from_batch;
  }
  // Last: a cancel settling the run's waiting tasks takes the same claim, so either the cancel
  // leaves this task to the batch's report, or this thread does not run it.
  if (!inputs_here || !run.tasks[s].claim.take()) return;
  for (uint32_t k = 0; k < marked; ++k) {
    if (read_here[k]) read_here[k]->read_in_batch = true;
  }
  // Attempt 1: it has never run, its last predecessor finishes just now (assign() keeps the
  // inputs found above, their count unchanged).
  next.assign(&run, s, 1, task.input_count, Clock::time_point{}, tiny);
  next.run_directly = true;
  next.holds_request = false;  // none, or the batch's charge covers it
  batch.count++;
}

void DirectRuns::park(TaskAttempt &&item, uint32_t worker) {
  parked_.push_back(Parked{std::move(item), worker});
}

bool DirectRuns::unpark(const RunState &run, TaskIndex t, Parked &out) {
  auto it = std::find_if(parked_.begin(), parked_.end(),
                         [&](const Parked &p) { return p.item.task == t && p.item.run == &run; });
  if (it == parked_.end()) return false;
  out = std::move(*it);
  if (it != parked_.end() - 1) *it = std::move(parked_.back());  // (never onto itself)
  parked_.pop_back();
  return true;
}

}  // namespace gf
