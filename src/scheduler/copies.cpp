// The end of data's copies, and device memory charged and given back for them: data freed after
// its last consumer (or once the copy or read that pins it is done), copies released to the
// backend or to their value's destroy function, and bytes returned to a device's ledger line.
#include "scheduler/memory.hpp"

namespace gf {

void Memory::free_data(RunState &run, DataIndex d, Deferred &deferred) {
  DataRun &data = run.data[d];
  if (data.pins > 0) {  // a copy reads it right now; the copy's completion frees it
    data.free_when_unpinned = true;
    return;
  }
  const Replica *first = data.replicas.begin();
  if (data.replicas.size() == 1 && first->owned && !first->value && first->space == kHostSpace &&
      data.spilled_from == kNoSpace && !data.value_destroy) {
    // A buffer in host memory alone, as a CPU task's output mostly is: no device memory to give
    // back and no spill list to leave.
    deferred.frees.push_back({kHostSpace, first->ptr, data.size});
    data.replicas.remove_owned();
  } else {
    free_copies(data, deferred);
  }
  // Host inputs belong to the graph: their copies on devices go, the caller's bytes or value
  // stay readable for the life of the run.
  if (run.graph().data(d).origin == DataOrigin::kProduced) {
    data.value = nullptr;
    data.phase = DataRun::Phase::kFreed;
  }
}

void Memory::free_copies(DataRun &data, Deferred &deferred) {
  const bool device_value = data.device_value();
  for (Replica &r : data.replicas) {
    if (!r.owned) continue;
    forget_resident(r);
    release_copy(data, r.space, r.ptr, r.value, deferred);
    if (r.space != kHostSpace) discharge(r.space, data.size);
  }
  if (device_value) data.value_destroy = nullptr;  // each form was destroyed above
  if (data.spilled_from != kNoSpace) {
    if (WorkerState *from = owner_of(data.spilled_from)) from->memory.spilled_now -= data.size;
    data.spilled_from = kNoSpace;
  }
  data.replicas.remove_owned();
  if (data.value_destroy) {
    deferred.destroys.emplace_back(data.value, data.value_destroy);
    data.value = nullptr;
    data.value_destroy = nullptr;
  }
}

void Memory::free_if_unpinned(RunState &run, DataIndex d, Deferred &deferred) {
  DataRun &data = run.data[d];
  if (data.pins == 0 && data.free_when_unpinned) {
    data.free_when_unpinned = false;
    free_data(run, d, deferred);
  }
}

void Memory::unpin(RunState &run, DataIndex d, Deferred &deferred) {
  DataRun &data = run.data[d];
  data.pins--;
  free_if_unpinned(run, d, deferred);
  // A spill that finished while this read held the data kept both copies; now the device copy
  // may go, if its device is still over its threshold.
  if (data.pins > 0 || data.phase != DataRun::Phase::kReady) return;
  std::vector<WorkerState *> devices;  // gathered first: spilling may drop these very replicas
  for (const Replica &r : data.replicas) {
    WorkerState *owner = owner_of(r.space);
    if (owner && owner->space != kHostSpace) devices.push_back(owner);
  }
  for (WorkerState *owner : devices) spill(*owner, 0, deferred);
}

void Memory::release_copy(const DataRun &data, SpaceId space, void *ptr, bool value,
                          Deferred &deferred) {
  if (!value) {
    deferred.frees.push_back({space, ptr, data.size});
  } else if (ptr && data.value_destroy) {
    deferred.destroys.emplace_back(ptr, data.value_destroy);
  }
}

void Memory::discharge(SpaceId space, uint64_t bytes) {
  WorkerState *owner = owner_of(space);
  if (!owner || bytes == 0) return;
  // Tasks waiting for memory there retry from the worker's own loop, not from inside whatever
  // freed the memory (which may be walking the same queues).
  owner->memory.release(bytes);
  notifier_.wake_one(owner->index);
}

bool Memory::charge_value(WorkerState &worker, uint64_t bytes, Deferred &deferred,
                          uint64_t &moving) {
  moving = 0;
  if (worker.memory.reserve(bytes)) return true;
  // The value exists already: anything not in use may go, held inputs last.
  moving = spill(worker, worker.memory.shortfall(FixedPoint{}, bytes), deferred, true);
  return false;
}

}  // namespace gf
