// What callers may read about runs and workers: plain snapshots taken under the scheduler's
// mutex, so that no caller ever touches scheduling state or the lock itself.
#include <algorithm>

#include "core/error.hpp"
#include "graph/task_error.hpp"
#include "scheduler/scheduler.hpp"

namespace gf {

Scheduler::TaskSnapshot Scheduler::task_snapshot(RunState &run, TaskIndex t) {
  Lock lock(mu_);
  const TaskRun &tr = run.tasks[t];
  TaskSnapshot out{tr.state, tr.attempts, tr.worker, ""};
  bool settled = tr.state == GF_TASK_FAILED || tr.state == GF_TASK_CANCELLED;
  auto it = run.errors.find(t);
  // Errors of settled tasks never change again, so the string stays valid for the run's life.
  if (settled && it != run.errors.end()) out.error = it->second.c_str();
  return out;
}

Scheduler::RunSnapshot Scheduler::run_snapshot(RunState &run) {
  Lock lock(mu_);
  return RunSnapshot{
      run.tasks.size(),
      run.succeeded,
      run.failed,
      run.cancelled,
      run.attempts,
      run.transfers,
      run.bytes_transferred,
      seconds_between(run.submitted_at, run.finished ? run.finished_at : Clock::now())};
}

std::string Scheduler::failure_summary(RunState &run) {
  Lock lock(mu_);
  TaskIndex t = run.first_failure;
  if (t == kNoIndex) return "no task failed";
  auto it = run.errors.find(t);
  const Graph &graph = run.graph();
  return graph.task_label(t) + " failed: " +
         (it == run.errors.end() ? std::string("?") : task_error_words(graph, t, it->second)) +
         " (" + std::to_string(run.failed) + " task(s) failed in all)";
}

DataRun &Scheduler::readable(RunState &run, DataIndex d) {
  DataRun &data = run.data[d];
  const Graph &graph = run.graph();
  switch (data.phase) {
    case DataRun::Phase::kReady:
      return data;
    case DataRun::Phase::kPending:
    case DataRun::Phase::kLeftToConsumer:
      fail(GF_ERR_STATE, graph.data_label(d) + " is not produced yet");
    case DataRun::Phase::kNeverProduced:
      fail(GF_ERR_STATE, graph.data_label(d) + " was never produced: its producer " +
                             graph.task_label(graph.data(d).producer) + " failed or was cancelled");
    case DataRun::Phase::kFreed:
      break;
  }
  fail(GF_ERR_STATE, graph.data_label(d) +
                         " was freed after its last consumer finished; mark it GF_DATA_KEEP to "
                         "read it back");
}

std::vector<std::pair<DataIndex, uint64_t>> Scheduler::readable_buffers(RunState &run) {
  Lock lock(mu_);
  std::vector<std::pair<DataIndex, uint64_t>> out;
  const Graph &graph = run.graph();
  for (DataIndex d = 0; d < graph.data_count(); ++d) {
    const DataRun &data = run.data[d];
    if (data.phase == DataRun::Phase::kReady && graph.data(d).kind == DataKind::kBuffer &&
        !data.replicas.empty()) {
      out.emplace_back(d, data.size);
    }
  }
  return out;
}

uint64_t Scheduler::read_buffer(RunState &run, DataIndex d, void *dst, uint64_t capacity) {
  Lock lock(mu_);
  DataRun &data = readable(run, d);
  const uint64_t size = data.size;
  if (!dst) return size;
  if (capacity < size) {
    fail(GF_ERR_INVALID_ARGUMENT, run.graph().data_label(d) + " has " + std::to_string(size) +
                                      " bytes; dst_capacity is " + std::to_string(capacity));
  }
  // A host copy is cheapest to read; any copy will do, and the pin keeps it where it is.
  Replica source = data.replicas.front();
  for (const Replica &r : data.replicas) {
    if (r.space == kHostSpace) source = r;
  }
  data.pins++;
  lock.unlock();
  std::exception_ptr failure;
  try {
    backend_.copy_sync(CopyRequest{source.space, source.ptr, kHostSpace, dst, size});
  } catch (...) {
    failure = std::current_exception();
  }
  Deferred deferred;
  lock.lock();
  memory_.unpin(run, d, deferred);
  lock.unlock();
  deferred.flush(backend_);
  if (failure) std::rethrow_exception(failure);
  return size;
}

void *Scheduler::read_value(RunState &run, DataIndex d) {
  Lock lock(mu_);
  DataRun &data = readable(run, d);
  if (data.value_movable()) {
    // The caller holds this form until gf_run_destroy: the value is pinned where it is now (a
    // move under way keeps the form the caller got; spill_done and transfer_done see to that).
    data.pin_value();
    for (Replica &r : data.replicas) memory_.forget_resident(r);
  }
  return data.value;
}

gf_device_memory Scheduler::device_memory(int device) {
  gf_device_memory out = GF_DEVICE_MEMORY_INIT;
  Lock lock(mu_);
  WorkerState *w = memory_.owner_of(device_space(device));
  if (!w) return out;
  const DeviceMemory &m = w->memory;
  out.capacity = m.capacity();
  // In use is resident data plus what running tasks reserved through gpu_memory requests.
  out.reserved = std::min(m.in_use(), m.requested_bytes);
  out.resident = m.in_use() - out.reserved;
  out.spilled = m.spilled_now;
  out.spilled_total = m.spilled_total;
  out.unspilled_total = m.unspilled_total;
  return out;
}

std::vector<Ledger::Line> Scheduler::ledger_lines(uint32_t worker) {
  Lock lock(mu_);
  return workers_.at(worker)->ledger.lines();
}

}  // namespace gf

namespace gf {

Scheduler::PoolSnapshot Scheduler::pool_snapshot() {
  PoolSnapshot out;
  Lock lock(mu_);
  out.workers.reserve(workers_.size());
  for (const auto &w : workers_) {
    PoolSnapshot::WorkerLoad load;
    load.ready = w->ready.size();
    load.fetching = w->fetching.size();
    load.running = w->running;
    load.granted = w->granted;
    load.batches = w->batches;
    out.queued += load.ready + load.fetching;
    out.workers.push_back(load);
  }
  uint64_t left = 0;
  for (const auto &[raw, run] : runs_) {
    PoolSnapshot::RunProgress p;
    p.sequence = run->sequence;
    p.tasks = run->tasks.size();
    p.succeeded = run->succeeded;
    p.failed = run->failed;
    p.cancelled = run->cancelled;
    p.left = run->tasks_left;
    p.finished = run->finished;
    p.elapsed_s =
        seconds_between(run->submitted_at, run->finished ? run->finished_at : Clock::now());
    left += p.left;
    out.runs.push_back(p);
  }
  out.running = running_total_;
  // Every queued or running task belongs to a run still listed (runs are kept until settled).
  const uint64_t busy = out.queued + out.running;
  out.waiting = left > busy ? left - busy : 0;
  out.succeeded_total = settled_totals_.succeeded;
  out.failed_total = settled_totals_.failed;
  out.cancelled_total = settled_totals_.cancelled;
  const Memory::Totals moved = memory_.totals();
  out.transfers_total = moved.transfers;
  out.bytes_transferred_total = moved.bytes;
  lock.unlock();
  std::sort(out.runs.begin(), out.runs.end(),
            [](const auto &a, const auto &b) { return a.sequence < b.sequence; });
  return out;
}

}  // namespace gf
