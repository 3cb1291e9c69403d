// Moving inputs to the memory space of the worker a task was placed on. Copies start when the
// task is placed (prefetch), so they overlap with whatever the worker is running; the task joins
// its worker's ready queue once the last input has arrived.
#include "core/error.hpp"
#include "scheduler/memory.hpp"

namespace gf {
namespace {

uint64_t waiter_key(DataIndex d, SpaceId space) {
  return (uint64_t{d} << 8) | space;
}
uint64_t space_bit(SpaceId space) {
  return uint64_t{1} << space;
}

}  // namespace

Memory::Memory(DeviceBackend &backend, const std::vector<std::unique_ptr<WorkerState>> &workers,
               Notifier &notifier, double spill_threshold, MovementSink &sink)
    : backend_(backend),
      workers_(workers),
      notifier_(notifier),
      sink_(sink),
      spill_threshold_(spill_threshold),
      space_owner_(kMaxSpaces, nullptr) {
  for (const auto &w : workers_) {
    if (w->space != kHostSpace) space_owner_.at(w->space) = w.get();
  }
}

bool Memory::needs_move(const RunState &run, DataIndex d, SpaceId space) {
  const DataRun &data = run.data[d];
  if (run.graph().data(d).kind == DataKind::kBuffer) return !data.replica_in(space);
  // Values move only when spilled (their host form alone left) and wanted on a device.
  if (space == kHostSpace || data.replicas.empty() || !data.value_movable()) return false;
  for (const Replica &r : data.replicas) {
    if (r.space != kHostSpace) return false;
  }
  return true;
}

bool Memory::inputs_in(const RunState &run, TaskIndex t, SpaceId space) {
  const Graph &graph = run.graph();
  const TaskDesc &task = graph.task(t);
  const DataIndex *in = graph.inputs(task);
  for (uint32_t i = 0; i < task.input_count; ++i) {
    if (needs_move(run, in[i], space)) return false;
  }
  return true;
}

double Memory::transfer_seconds(const RunState &run, TaskIndex t, SpaceId space) const {
  const Graph &graph = run.graph();
  const TaskDesc &task = graph.task(t);
  const DataIndex *in = graph.inputs(task);
  double seconds = 0;
  for (uint32_t i = 0; i < task.input_count; ++i) {
    const DataRun &data = run.data[in[i]];
    if (data.replicas.empty() || !needs_move(run, in[i], space)) continue;
    seconds += backend_.transfer_seconds(data.replicas.front().space, space, data.size);
  }
  return seconds;
}

uint64_t Memory::task_device_bytes(const RunState &run, TaskIndex t) {
  const Graph &graph = run.graph();
  const TaskDesc &task = graph.task(t);
  // Each size is at most FixedPoint::kMaxBytes; the sum saturates just past it (never fits).
  uint64_t bytes = 0;
  auto add = [&](uint64_t size) { bytes = std::min(bytes + size, FixedPoint::kMaxBytes + 1); };
  const DataIndex *in = graph.inputs(task);
  for (uint32_t i = 0; i < task.input_count; ++i) {
    if (graph.data(in[i]).kind == DataKind::kBuffer) add(run.data[in[i]].size);
  }
  const DataIndex *out = graph.outputs(task);
  for (uint32_t i = 0; i < task.output_count; ++i) {
    if (graph.data(out[i]).kind == DataKind::kBuffer) add(graph.data(out[i]).size);
  }
  return bytes;
}

void Memory::count_inputs(RunState &run, TaskIndex t, uint32_t DataRun::*counter, int delta,
                          bool values_only) {
  const Graph &graph = run.graph();
  const TaskDesc &task = graph.task(t);
  const DataIndex *in = graph.inputs(task);
  for (uint32_t i = 0; i < task.input_count; ++i) {
    if (!values_only || graph.data(in[i]).kind == DataKind::kValue) {
      uint32_t &value = run.data[in[i]].*counter;
      value = static_cast<uint32_t>(static_cast<int64_t>(value) + delta);
    }
  }
}

void Memory::fetch_inputs(WorkerState &worker, RunState &run, TaskIndex t, Deferred &deferred) {
  const Graph &graph = run.graph();
  const TaskDesc &task = graph.task(t);
  TaskRun &tr = run.tasks[t];
  const DataIndex *in = graph.inputs(task);
  tr.missing_inputs = 0;
  tr.memory_blocked = false;
  for (uint32_t i = 0; i < task.input_count; ++i) {
    DataIndex d = in[i];
    if (!needs_move(run, d, worker.space)) continue;
    DataRun &data = run.data[d];
    tr.missing_inputs++;
    if (!(data.arriving & space_bit(worker.space)) &&
        !start_transfer(run, d, worker.space, deferred)) {
      tr.memory_blocked = true;  // retried when memory is released on that device
      continue;
    }
    run.transfer_waiters.emplace(waiter_key(d, worker.space),
                                 RunState::Waiter{t, tr.placement_epoch});
  }
}

void Memory::count_transfer(RunState &run, DataIndex d, SpaceId to) {
  DataRun &data = run.data[d];
  data.arriving |= space_bit(to);
  data.pins++;
  in_flight_++;
  run.transfers++;
  run.bytes_transferred += data.size;
  totals_.transfers++;
  totals_.bytes += data.size;
}

bool Memory::start_transfer(RunState &run, DataIndex d, SpaceId to, Deferred &deferred) {
  DataRun &data = run.data[d];
  if (data.replicas.empty()) fail(GF_ERR_INTERNAL, "no replica to copy from");
  const Replica source = data.replicas.front();
  WorkerState *owner = owner_of(to);
  if (owner && !owner->memory.reserve(data.size)) {
    spill(*owner, owner->memory.shortfall(FixedPoint{}, data.size), deferred);
    return false;  // retried when memory is released there
  }
  std::shared_ptr<RunState> keep_alive = run.shared_from_this();
  if (source.value) {
    // A spilled device value comes back through its unspill function, outside the mutex.
    if (owner) spill(*owner, 0, deferred);
    count_transfer(run, d, to);
    const int32_t device = owner ? owner->device : -1;
    deferred.calls.emplace_back([this, keep_alive, d, from = source.space, to, device,
                                 host = source.ptr, ops = data.value_ops(),
                                 began = movement_began()] {
      void *back = ops.unspill(host, device, ops.user_data);
      sink_.transfer_done(keep_alive, d, from, to, back,
                          back ? std::string() : std::string("its unspill function returned NULL"),
                          began);
    });
    return true;
  }
  void *destination = backend_.allocate(to, data.size);
  if (!destination) {
    if (owner) owner->memory.unreserve(data.size);  // no news for waiting tasks
    return false;
  }
  if (owner) spill(*owner, 0, deferred);
  count_transfer(run, d, to);
  backend_.copy_async(CopyRequest{source.space, source.ptr, to, destination, data.size},
                      [this, keep_alive, d, from = source.space, to, destination,
                       began = movement_began()](const std::string &error) {
                        sink_.transfer_done(keep_alive, d, from, to, destination, error, began);
                      });
  return true;
}

void Memory::transfer_arrived(const std::shared_ptr<RunState> &run_ptr, DataIndex d, SpaceId from,
                              SpaceId to, void *ptr, const std::string &error,
                              Clock::time_point began, Deferred &deferred,
                              std::vector<Arrival> &out) {
  RunState &run = *run_ptr;
  DataRun &data = run.data[d];
  WorkerState *owner = owner_of(to);
  in_flight_--;
  report_movement(GF_EVENT_TRANSFER_FINISHED, run, d, from, to, error.empty(), began, deferred);
  data.arriving &= ~space_bit(to);
  data.pins--;
  bool wanted = error.empty() && data.phase == DataRun::Phase::kReady && !data.free_when_unpinned;
  const bool value = run.graph().data(d).kind == DataKind::kValue;
  // A device value read back by the caller while it came back stays in the form the caller
  // got (gf_run_value pins it); tasks waiting for it read that form.
  const bool store = wanted && !(value && !data.value_movable());
  if (store) {
    data.replicas.push_back(Replica{to, true, ptr, 0, value});
    if (owner) {
      note_resident(run, d, to);
      unspilled(data, to);
    }
    if (value) {
      Replica *host = data.replicas.find(kHostSpace);
      if (host && data.pins == 0 && data.uses == 0) {  // no one reads the host form
        release_copy(data, kHostSpace, host->ptr, true, deferred);
        data.replicas.remove(kHostSpace);
      }
      data.refresh_value();
    }
  } else {
    if (ptr) release_copy(data, to, ptr, value, deferred);
    if (owner) discharge(to, data.size);
  }
  auto [begin, end] = run.transfer_waiters.equal_range(waiter_key(d, to));
  std::vector<RunState::Waiter> waiters;
  for (auto it = begin; it != end; ++it) waiters.push_back(it->second);
  run.transfer_waiters.erase(begin, end);
  for (const RunState::Waiter &waiter : waiters) {
    TaskRun &tr = run.tasks[waiter.task];
    if (tr.state != GF_TASK_QUEUED || tr.placement_epoch != waiter.epoch) continue;
    WorkerState &worker = *workers_[tr.worker];
    const bool done = !wanted || (--tr.missing_inputs == 0 && !tr.memory_blocked);
    if (!done) continue;
    std::erase_if(worker.fetching,
                  [&](const TaskRef &r) { return r.run == &run && r.task == waiter.task; });
    out.push_back(Arrival{
        TaskRef{&run, waiter.task}, worker.index,
        wanted ? std::string()
               : "moving " + run.graph().data_label(d) + " to " + worker.name +
                     " failed: " + (error.empty() ? "the data was released meanwhile" : error)});
  }
  free_if_unpinned(run, d, deferred);
}

void Memory::retry_memory_blocked(WorkerState &worker, Deferred &deferred,
                                  std::vector<TaskRef> &arrived) {
  for (const TaskRef &ref : worker.fetching) {
    TaskRun &tr = ref.run->tasks[ref.task];
    if (!tr.memory_blocked) continue;
    tr.placement_epoch++;  // waiters registered before this refetch are now stale
    fetch_inputs(worker, *ref.run, ref.task, deferred);
    if (tr.missing_inputs == 0) tr.memory_blocked = false;
  }
  std::erase_if(worker.fetching, [&](const TaskRef &ref) GF_REQUIRES(scheduling_lock) {
    bool done = ref.run->tasks[ref.task].missing_inputs == 0;
    if (done) arrived.push_back(ref);
    return done;
  });
}

}  // namespace gf
