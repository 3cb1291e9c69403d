// What happens when an attempt ends: what it held goes back, and the task succeeds (its outputs
// become data, its inputs are consumed, its successors whose last dependency it was become
// ready), is retried, fails (and everything downstream with it) or is cancelled.
#include <cstdint>

#include "scheduler/scheduler.hpp"

namespace gf {

size_t Scheduler::finish(WorkerState &worker, TaskAttempt *items, size_t count,
                         Deferred &deferred) {
  RunState &run = *items[0].run;
  // Alike tasks share a cost key: their times are learnt into one estimate.
  Estimates::Row learnt(estimates_, run, worker.kind);
  size_t settled = 0;
  for (; settled < count; ++settled) {
    TaskAttempt &done = items[settled];
    // A successor run directly after the one before it (a chain's next link): its predecessors
    // settled just before it. One that is not the scheduler's to adopt (yet) ends the row;
    // complete_batch parks or drops it.
    if (settled > 0 && done.run_directly) {
      if (adopt(worker, done) != Adoption::kAdopted) break;
      done.run_directly = false;
    }
    end_attempt(worker, done, learnt);
    // (An attempt that returned success without setting every output was failed by its worker
    // thread, which checked them outside the lock.)
    if (done.succeeded()) {
      succeed(worker, done, deferred);
    } else {
      fail_attempt(worker, done, deferred);
    }
  }
  learnt.done();
  worker.running -= static_cast<uint32_t>(settled);
  running_total_ -= settled;
  maybe_finish_run(run, deferred);
  return settled;
}

void Scheduler::end_attempt(WorkerState &worker, TaskAttempt &done, Estimates::Row &learnt) {
  RunState &run = *done.run;
  const TaskDesc &task = run.graph().task(done.task);
  if (task.input_count && (run.has_values || worker.space != kHostSpace)) {
    memory_.count_inputs(run, done.task, &DataRun::uses, -1,
                         /*values_only=*/worker.space == kHostSpace);
  }
  worker.backlog_s -= run.tasks[done.task].estimate_s;
  if (task.request != kEmptyRequest && done.holds_request) {
    const ResolvedRequest &request = run.requests[task.request];
    worker.ledger.release(request.request);
    if (worker.space != kHostSpace) {
      worker.memory.requested_bytes -= whole_bytes(request.gpu_memory);
    }
  }
  if (done.outcome != TaskAttempt::Outcome::kNotRun && done.timed) {
    learnt.add(done.task, done.seconds);
  }
}

void Scheduler::fail_attempt(WorkerState &worker, TaskAttempt &done, Deferred &deferred) {
  RunState &run = *done.run;
  const TaskDesc &task = run.graph().task(done.task);
  TaskRun &tr = run.tasks[done.task];
  store_left_inputs(run, done);  // it may run again, or be settled, reading them as usual
  release_outputs(worker, done, deferred);  // the attempt produced nothing usable

  const bool retries_left = tr.attempts <= task.retries;
  const bool not_run = done.outcome == TaskAttempt::Outcome::kNotRun;
  if (not_run || run.cancel_requested.load(std::memory_order_relaxed)) {
    // An attempt that ends unsuccessfully once its run is being cancelled was stopped by the
    // cancel (a command killed, a body that saw gf_task_ctx_cancelled and gave up) or would only
    // have been retried: the task is cancelled, counted once as such in the run's counters, and
    // its error keeps what the attempt said.
    if (not_run) {
      run.set_error(done.task, "cancelled before it started");
    } else if (retries_left) {
      run.set_error(done.task,
                    "cancelled before its retry; the last attempt failed: " + done.error);
    } else {
      run.set_error(done.task, std::move(done.error));
    }
    settle(run, done.task, GF_TASK_CANCELLED, deferred);
  } else if (retries_left && !stopping_) {
    run.set_error(done.task, done.error);  // kept in case the last attempt fails too
    tr.state = GF_TASK_WAITING;
    tr.claim.give_back();  // if it ran directly after its predecessors, a cancel may settle it
    make_ready(run, done.task, worker.index, deferred);
  } else {
    fail_task(run, done.task, std::move(done.error), deferred);
  }
}

void Scheduler::release_outputs(WorkerState &worker, const TaskAttempt &done, Deferred &deferred) {
  const Graph &graph = done.run->graph();
  const TaskDesc &task = graph.task(done.task);
  const DataIndex *out = graph.outputs(task);
  uint64_t charged = 0;
  for (uint32_t i = 0; i < task.output_count; ++i) {
    const TaskAttempt::Output &o = done.outputs[i];
    const DataDesc &desc = graph.data(out[i]);
    if (desc.kind == DataKind::kBuffer && worker.space != kHostSpace) {
      charged += o.charged_at_run ? o.size : desc.size;
    }
    if (desc.kind == DataKind::kValue && o.set && o.charged_at_run) charged += o.size;
    if (!o.set) continue;
    if (desc.kind == DataKind::kValue) {
      if (o.value_destroy) deferred.destroys.emplace_back(o.ptr, o.value_destroy);
    } else {
      deferred.frees.push_back({worker.space, o.ptr, o.size});
    }
  }
  if (charged) memory_.discharge(worker.space, charged);
}

void Scheduler::finish_async(WorkerState &worker, TaskAttempt &done,
                             const std::string &device_error) {
  Deferred deferred;
  {
    Lock lock(mu_);
    if (!device_error.empty() && done.succeeded()) {
      done.outcome = TaskAttempt::Outcome::kFailed;
      done.error = "the device reported an error after the body returned: " + device_error;
    }
    finish(worker, &done, 1, deferred);
    // Its resources are free again: a sleeping thread of this worker may start the next task.
    wake_one(worker);
  }
  deferred.flush(backend_);
}

void Scheduler::succeed(WorkerState &worker, TaskAttempt &done, Deferred &deferred) {
  RunState &run = *done.run;
  const Graph &graph = run.graph();
  const TaskDesc &task = graph.task(done.task);
  if (task.output_count) store_outputs(worker, done, task);
  if (!run.errors.empty()) run.errors.erase(done.task);  // a failed attempt's, now retried
  run.tasks[done.task].state = GF_TASK_SUCCEEDED;
  run.succeeded++;
  settled_totals_.succeeded++;
  run.tasks_left--;
  const DataIndex *in = graph.inputs(task);
  for (uint32_t i = 0; i < task.input_count; ++i) {
    DataRun &data = run.data[in[i]];
    if (data.phase == DataRun::Phase::kLeftToConsumer) {
      // Its last consumer: freed from where this task read it (store_outputs left it so).
      deferred.frees.push_back({kHostSpace, const_cast<void *>(done.inputs[i].first), data.size});
      data.consumers_left = 0;
      data.phase = DataRun::Phase::kFreed;
      continue;
    }
    consumed(run, in[i], deferred);
  }
  const GraphAnalysis &a = graph.analysis();
  if (a.successor_begin[done.task] != a.successor_begin[done.task + 1]) {
    release_successors(worker, run, done.task, deferred);
  }
  // New results may lift the device over its threshold after every check made at placement.
  // Checked once the successors are placed, so the inputs they hold are spilled last.
  if (worker.space != kHostSpace) memory_.spill(worker, 0, deferred);
}

void Scheduler::store_outputs(WorkerState &worker, const TaskAttempt &done, const TaskDesc &task) {
  RunState &run = *done.run;
  const Graph &graph = run.graph();
  const DataIndex *out = graph.outputs(task);
  for (uint32_t i = 0; i < task.output_count; ++i) {
    DataRun &data = run.data[out[i]];
    const TaskAttempt::Output &o = done.outputs[i];
    data.size = o.size;
    if (o.read_in_batch && data.consumers_left == 1 && !data.keep) {
      // Its only consumer left ran after it in this batch and frees it when completed, right
      // after, under this same hold of the mutex: nothing else can see it in between, and it need
      // not be stored as a replica only to be freed.
      // (read_in_batch: a host buffer without a run-time charge, made and read on a CPU worker.)
      data.phase = DataRun::Phase::kLeftToConsumer;
      continue;
    }
    if (graph.data(out[i]).kind == DataKind::kValue) {
      data.value = o.ptr;
      data.value_destroy = o.value_destroy;
      if (o.charged_at_run) {  // a device value: device data like a buffer
        data.replicas.push_back(Replica{worker.space, true, o.ptr, 0, true});
        data.set_value_ops(o.value_ops);
        if (data.value_movable()) memory_.note_resident(run, out[i], worker.space);
      }
    } else {
      data.replicas.push_back(Replica{worker.space, true, o.ptr});
      if (worker.space != kHostSpace) memory_.note_resident(run, out[i], worker.space);
    }
    data.phase = DataRun::Phase::kReady;
  }
}

void Scheduler::store_left_inputs(RunState &run, const TaskAttempt &item) {
  const Graph &graph = run.graph();
  const DataIndex *in = graph.inputs(graph.task(item.task));
  for (uint32_t i = 0; i < item.inputs.size(); ++i) {
    DataRun &data = run.data[in[i]];
    if (data.phase != DataRun::Phase::kLeftToConsumer) continue;
    data.replicas.push_back(Replica{kHostSpace, true, const_cast<void *>(item.inputs[i].first)});
    data.phase = DataRun::Phase::kReady;
  }
}

void Scheduler::release_successors(WorkerState &worker, RunState &run, TaskIndex t,
                                   Deferred &deferred) {
  const GraphAnalysis &a = run.graph().analysis();
  for (uint32_t e = a.successor_begin[t]; e < a.successor_begin[t + 1]; ++e) {
    TaskIndex s = a.successors[e];
    TaskRun &next = run.tasks[s];
    if (--next.remaining_deps != 0 || next.state != GF_TASK_WAITING) continue;
    // A claimed waiting task ran already: in the batch being completed, which adopts it, or in
    // one completed earlier, which left it parked for this.
    if (!next.claim.is_taken()) {
      make_ready(run, s, worker.index, deferred);
    } else if (direct_.any_parked()) {
      adopt_parked(run, s, deferred);
    }
  }
}

void Scheduler::fail_task(RunState &run, TaskIndex t, std::string error, Deferred &deferred) {
  if (run.first_failure == kNoIndex) run.first_failure = t;
  run.set_error(t, std::move(error));
  settle(run, t, GF_TASK_FAILED, deferred);
  // Everything downstream fails without running; it is all still waiting on this task.
  const GraphAnalysis &a = run.graph().analysis();
  std::vector<TaskIndex> stack{t};
  while (!stack.empty()) {
    TaskIndex u = stack.back();
    stack.pop_back();
    for (uint32_t e = a.successor_begin[u]; e < a.successor_begin[u + 1]; ++e) {
      TaskIndex s = a.successors[e];
      if (run.tasks[s].state != GF_TASK_WAITING) continue;
      run.set_error(s, "not run: its dependency " + run.graph().task_label(u) + " failed");
      settle(run, s, GF_TASK_FAILED, deferred);
      stack.push_back(s);
    }
  }
}

void Scheduler::settle(RunState &run, TaskIndex t, gf_task_state state, Deferred &deferred) {
  const Graph &graph = run.graph();
  const TaskDesc &task = graph.task(t);
  run.tasks[t].state = state;
  (state == GF_TASK_CANCELLED ? settled_totals_.cancelled : settled_totals_.failed)++;
  (state == GF_TASK_CANCELLED ? run.cancelled : run.failed)++;
  const DataIndex *in = graph.inputs(task);
  for (uint32_t i = 0; i < task.input_count; ++i) consumed(run, in[i], deferred);
  const DataIndex *out = graph.outputs(task);
  for (uint32_t i = 0; i < task.output_count; ++i) {
    run.data[out[i]].phase = DataRun::Phase::kNeverProduced;
  }
  run.tasks_left--;
  maybe_finish_run(run, deferred);
}

void Scheduler::consumed(RunState &run, DataIndex d, Deferred &deferred) {
  DataRun &data = run.data[d];
  if (--data.consumers_left == 0 && !data.keep && data.phase == DataRun::Phase::kReady) {
    memory_.free_data(run, d, deferred);
  }
}

}  // namespace gf
