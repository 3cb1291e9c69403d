// Spilling: when a device holds more than its threshold of data, or a task needs room that is not
// free, data that no dispatched task is reading moves to host memory, least recently used first.
// A copy that already exists elsewhere is simply dropped. Spilled data comes back through the
// ordinary input transfers when a task on a device needs it.
#include "core/error.hpp"
#include "scheduler/memory.hpp"

namespace gf {

void Memory::note_resident(RunState &run, DataIndex d, SpaceId space) {
  WorkerState *w = owner_of(space);
  Replica *r = run.data[d].replicas.find(space);
  if (!w || !r) return;
  w->memory.touch(run, d, *r, ++lru_clock_);
}

uint64_t Memory::make_room_for(WorkerState &worker, RunState &run, TaskIndex t, uint64_t shortfall,
                               bool evict_held, Deferred &deferred) {
  count_inputs(run, t, &DataRun::uses, +1);  // counted as in use while the victims are chosen
  const uint64_t moving = spill(worker, shortfall, deferred, evict_held);
  count_inputs(run, t, &DataRun::uses, -1);
  return moving;
}

void Memory::forget_resident(Replica &replica) {
  if (!replica.lru_tick) return;
  if (WorkerState *w = owner_of(replica.space)) w->memory.forget(replica);
}

uint64_t Memory::spill(WorkerState &w, uint64_t shortfall, Deferred &deferred, bool evict_held) {
  if (spill_threshold_ >= 1 || w.space == kHostSpace) return 0;
  double limit = spill_threshold_ * static_cast<double>(w.memory.capacity());
  double over = static_cast<double>(w.memory.in_use()) - limit;
  const uint64_t underway = w.memory.spilling_bytes;  // started by earlier calls
  // Room on demand is made all or nothing: when even everything that may go would not free
  // `shortfall`, the task has to wait for running tasks anyway, and pushing data out now would
  // only undo work (the next tasks' inputs would come straight back).
  if (shortfall > underway && spillable_bytes(w, evict_held) < shortfall - underway) {
    shortfall = 0;
    evict_held = false;
  }
  uint64_t target = std::max(over > 0 ? static_cast<uint64_t>(over) : 0, shortfall);
  if (target <= underway) return underway;
  target -= underway;
  uint64_t released = 0;  // by this call: dropped now, or copies started now
  for (int pass = 0; pass < (evict_held ? 2 : 1) && released < target; ++pass) {
    for (auto it = w.memory.lru.begin(); it != w.memory.lru.end() && released < target;) {
      auto [run, d] = it->second;
      DataRun &data = run->data[d];
      Replica *replica = data.replicas.find(w.space);
      if (data.uses > 0 || data.pins > 0 || !replica || (pass == 0 && data.holds > 0)) {
        ++it;
        continue;
      }
      it = w.memory.lru.erase(it);
      replica->lru_tick = 0;
      if (!start_spill(w, *run, d, *replica, deferred)) {
        note_resident(*run, d, w.space);  // host memory is exhausted: it stays, listed again
        return released + underway;
      }
      released += data.size;
    }
  }
  return released + underway;
}

uint64_t Memory::spillable_bytes(WorkerState &w, bool include_held) {
  uint64_t bytes = 0;
  for (const auto &[tick, entry] : w.memory.lru) {
    const DataRun &data = entry.first->data[entry.second];
    if (data.uses == 0 && data.pins == 0 && (include_held || data.holds == 0)) bytes += data.size;
  }
  return bytes;
}

void Memory::drop_device_replica(DataRun &data, Replica &replica, Deferred &deferred) {
  // Unlisted first: a task may have touched it since it was chosen, listing it again.
  forget_resident(replica);
  SpaceId space = replica.space;
  release_copy(data, space, replica.ptr, replica.value, deferred);
  data.replicas.remove(space);
  if (data.device_value()) data.refresh_value();
  discharge(space, data.size);
}

bool Memory::start_spill(WorkerState &w, RunState &run, DataIndex d, Replica &replica,
                         Deferred &deferred) {
  DataRun &data = run.data[d];
  const uint64_t size = data.size;
  if (data.replicas.size() > 1) {  // another copy exists: dropping this one loses nothing
    report_movement(GF_EVENT_SPILL_FINISHED, run, d, w.space, kHostSpace, true, {}, deferred);
    drop_device_replica(data, replica, deferred);
    w.memory.spilled_total += size;
    return true;
  }
  if (replica.value) {
    // A device value moves through its spill function, called outside the mutex; nothing of
    // host memory is allocated for it here.
    data.pins++;
    w.memory.spilling_bytes += size;
    in_flight_++;
    std::shared_ptr<RunState> keep_alive = run.shared_from_this();
    SpaceId space = w.space;
    deferred.calls.emplace_back([this, keep_alive, d, space, value = replica.ptr,
                                 ops = data.value_ops(), began = movement_began()] {
      void *host = ops.spill(value, ops.user_data);
      sink_.spill_done(keep_alive, d, space, host,
                       host ? std::string() : std::string("its spill function returned NULL"),
                       began);
    });
    return true;
  }
  // Runs on worker threads inside the scheduler: a refusal is an answer, never an exception.
  void *host = backend_.allocate(kHostSpace, size);
  if (!host) return false;
  data.pins++;
  w.memory.spilling_bytes += size;
  in_flight_++;
  std::shared_ptr<RunState> keep_alive = run.shared_from_this();
  SpaceId space = w.space;
  backend_.copy_async(
      CopyRequest{space, replica.ptr, kHostSpace, host, size},
      [this, keep_alive, d, space, host, began = movement_began()](const std::string &error) {
        sink_.spill_done(keep_alive, d, space, host, error, began);
      });
  return true;
}

void Memory::spill_arrived(const std::shared_ptr<RunState> &run_ptr, DataIndex d, SpaceId space,
                           void *host, const std::string &error, Clock::time_point began,
                           Deferred &deferred) {
  RunState &run = *run_ptr;
  DataRun &data = run.data[d];
  WorkerState &w = *owner_of(space);
  in_flight_--;
  report_movement(GF_EVENT_SPILL_FINISHED, run, d, space, kHostSpace, error.empty(), began,
                  deferred);
  w.memory.spilling_bytes -= data.size;
  data.pins--;
  bool alive = data.phase == DataRun::Phase::kReady && !data.free_when_unpinned;
  const bool value = run.graph().data(d).kind == DataKind::kValue;
  // A device value read back by the caller meanwhile is pinned where it is (gf_run_value).
  if (value && !data.value_movable()) alive = false;
  if (!error.empty() || !alive) {
    release_copy(data, kHostSpace, host, value, deferred);
    if (value && !error.empty()) {
      data.pin_value();  // it cannot be moved: pinned from now on
    } else if (alive) {
      note_resident(run, d, space);  // the copy failed: it stays on the device
    }
  } else {
    data.replicas.push_back(Replica{kHostSpace, true, host, 0, value});
    Replica *on_device = data.replicas.find(space);
    if (on_device && data.uses == 0 && data.pins == 0) {
      drop_device_replica(data, *on_device, deferred);
      w.memory.spilled_now += data.size;
      w.memory.spilled_total += data.size;
      data.spilled_from = space;
    } else if (on_device) {
      note_resident(run, d, space);  // a task or a copy reads it meanwhile: keep both
    }
  }
  free_if_unpinned(run, d, deferred);
}

void Memory::unspilled(DataRun &data, SpaceId to) {
  if (data.spilled_from == kNoSpace) return;
  if (WorkerState *from = owner_of(data.spilled_from)) from->memory.spilled_now -= data.size;
  if (WorkerState *dest = owner_of(to)) dest->memory.unspilled_total += data.size;
  data.spilled_from = kNoSpace;
}

}  // namespace gf
