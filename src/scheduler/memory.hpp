// Where data is and how it moves: the copies of each data object in the pool's memory spaces,
// input transfers to the worker a task was placed on (started at placement, so they overlap the
// worker's current work), spilling device data to host memory past a threshold or on demand,
// freeing copies once data is no longer needed, and the device-memory charges of all of it
// (scheduler/device_memory.hpp). A part of the scheduler: everything here runs under the
// scheduler's mutex, and copies finishing on backend threads come back through MovementSink
// (the scheduler), which takes the mutex and hands the news to this part.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/events.hpp"
#include "devices/backend.hpp"
#include "scheduler/deferred.hpp"
#include "scheduler/notifier.hpp"
#include "scheduler/run_state.hpp"
#include "scheduler/scheduling_lock.hpp"
#include "scheduler/worker_state.hpp"

namespace gf {

// Receives the end of every copy and spill Memory starts, on the backend's thread (or the thread
// that flushed a value's move), without the scheduler's mutex.
class MovementSink {
 public:
  virtual void transfer_done(const std::shared_ptr<RunState> &run, DataIndex d, SpaceId from,
                             SpaceId to, void *ptr, const std::string &error,
                             Clock::time_point began) = 0;
  virtual void spill_done(const std::shared_ptr<RunState> &run, DataIndex d, SpaceId space,
                          void *host, const std::string &error, Clock::time_point began) = 0;

 protected:
  ~MovementSink() = default;
};

class Memory {
 public:
  Memory(DeviceBackend &backend, const std::vector<std::unique_ptr<WorkerState>> &workers,
         Notifier &notifier, double spill_threshold, MovementSink &sink);

  // Where transfers and spills are reported (the pool's event stream). Set once, before any run.
  void set_events(const EventHub *events) { events_ = events; }
  // The GPU worker whose device is `space` (nullptr for host memory).
  WorkerState *owner_of(SpaceId space) const { return space_owner_[space]; }

  // ---- a task's inputs ----
  // Whether input `d` must be moved into `space` before a task there reads it: a buffer without
  // a copy there, or a spilled device value (host form only) wanted on a device.
  static bool needs_move(const RunState &run, DataIndex d, SpaceId space)
      GF_REQUIRES(scheduling_lock);
  // Whether no input of task t must be moved into `space`.
  static bool inputs_in(const RunState &run, TaskIndex t, SpaceId space)
      GF_REQUIRES(scheduling_lock);
  // Estimated seconds to move task t's missing inputs into `space`.
  double transfer_seconds(const RunState &run, TaskIndex t, SpaceId space) const
      GF_REQUIRES(scheduling_lock);
  // Bytes of buffer inputs and declared buffer outputs a task needs on a device at once.
  static uint64_t task_device_bytes(const RunState &run, TaskIndex t) GF_REQUIRES(scheduling_lock);
  // A task placed on a device holds its inputs there (spilled only as a last resort, for the
  // task first in line) from placement until it starts (its inputs are then in use) or leaves
  // the worker without running: inputs that arrived early are not pushed out again while the
  // rest are still moving. Tasks on CPU workers read host copies, which are never spilled, so
  // they count nothing: the CPU hot path stays free of this bookkeeping.
  static void hold_inputs(const WorkerState &worker, RunState &run, TaskIndex t, int delta)
      GF_REQUIRES(scheduling_lock) {
    if (worker.space != kHostSpace) count_inputs(run, t, &DataRun::holds, delta);
  }
  // Adds delta to one counter of each input of a task (only its opaque values: values_only).
  static void count_inputs(RunState &run, TaskIndex t, uint32_t DataRun::*counter, int delta,
                           bool values_only = false) GF_REQUIRES(scheduling_lock);
  // Starts moving task t's missing inputs to `worker` (placed there); it waits in the worker's
  // fetching list until they have all arrived.
  void fetch_inputs(WorkerState &worker, RunState &run, TaskIndex t, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  // Fetches again the inputs of tasks whose copies waited for device memory on `worker`; those
  // whose inputs are all there now leave the fetching list into `arrived`.
  void retry_memory_blocked(WorkerState &worker, Deferred &deferred, std::vector<TaskRef> &arrived)
      GF_REQUIRES(scheduling_lock);

  // ---- copies that finished (from the MovementSink, under the mutex) ----
  struct Arrival {
    TaskRef task;
    uint32_t worker;
    std::string error;  // empty: all its inputs are there now (it left the fetching list)
  };
  // A copy of `d` into `to` ended; the tasks it completes or fails go to `out`.
  void transfer_arrived(const std::shared_ptr<RunState> &run, DataIndex d, SpaceId from, SpaceId to,
                        void *ptr, const std::string &error, Clock::time_point began,
                        Deferred &deferred, std::vector<Arrival> &out) GF_REQUIRES(scheduling_lock);
  void spill_arrived(const std::shared_ptr<RunState> &run, DataIndex d, SpaceId space, void *host,
                     const std::string &error, Clock::time_point began, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  // Copies and value moves under way, all devices: while any is, memory may still be freed.
  uint64_t moving() const GF_REQUIRES(scheduling_lock) { return in_flight_; }

  // ---- device memory ----
  // Starts moving data off `worker`'s device until it is under its threshold and `shortfall`
  // more bytes are free; returns the bytes released or on their way (0: nothing can go). Inputs
  // of running tasks never go; inputs of queued tasks only when `evict_held`, and then last.
  // The shortfall is made up all or nothing: if it cannot be, only the threshold is enforced.
  uint64_t spill(WorkerState &worker, uint64_t shortfall, Deferred &deferred,
                 bool evict_held = false) GF_REQUIRES(scheduling_lock);
  // spill() for task t, which needs `shortfall` more bytes there: its own inputs never go.
  uint64_t make_room_for(WorkerState &worker, RunState &run, TaskIndex t, uint64_t shortfall,
                         bool evict_held, Deferred &deferred) GF_REQUIRES(scheduling_lock);
  // Data now in use on a device: last in its spill order.
  void note_resident(RunState &run, DataIndex d, SpaceId space) GF_REQUIRES(scheduling_lock);
  void forget_resident(Replica &replica) GF_REQUIRES(scheduling_lock);
  // Gives device memory back; tasks waiting for memory there retry from the worker's own loop.
  void discharge(SpaceId space, uint64_t bytes) GF_REQUIRES(scheduling_lock);
  // A body sets a device value of `bytes` on `worker` (gf_task_ctx_set_device_value): charges
  // them, spilling other data first when they do not fit; false (nothing charged) when no room
  // can be made now. `moving` tells how many bytes are on their way off the device meanwhile.
  bool charge_value(WorkerState &worker, uint64_t bytes, Deferred &deferred, uint64_t &moving)
      GF_REQUIRES(scheduling_lock);

  // ---- data no longer needed ----
  // Frees every copy the run owns of `d` (or marks it to go once its last pin does).
  void free_data(RunState &run, DataIndex d, Deferred &deferred) GF_REQUIRES(scheduling_lock);
  // Frees data whose release waited for its last pin (a copy or a read) to go.
  void free_if_unpinned(RunState &run, DataIndex d, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  // A caller's read of `d` ended: the pin goes, and the device copies it kept may be spilled.
  void unpin(RunState &run, DataIndex d, Deferred &deferred) GF_REQUIRES(scheduling_lock);
  // Releases one copy of a data object: backend memory, or a value form (its destroy function).
  static void release_copy(const DataRun &data, SpaceId space, void *ptr, bool value,
                           Deferred &deferred);

  struct Totals {
    uint64_t transfers = 0, bytes = 0;
  };
  Totals totals() const GF_REQUIRES(scheduling_lock) { return totals_; }

 private:
  bool start_transfer(RunState &run, DataIndex d, SpaceId to, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  // Counts a copy (or a value's move) of `d` into `to` that starts now.
  void count_transfer(RunState &run, DataIndex d, SpaceId to) GF_REQUIRES(scheduling_lock);
  uint64_t spillable_bytes(WorkerState &worker, bool include_held) GF_REQUIRES(scheduling_lock);
  bool start_spill(WorkerState &worker, RunState &run, DataIndex d, Replica &replica,
                   Deferred &deferred) GF_REQUIRES(scheduling_lock);
  // Frees one device copy of data that lives elsewhere too, and takes it off the spill list.
  void drop_device_replica(DataRun &data, Replica &replica, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);
  void unspilled(DataRun &data, SpaceId to) GF_REQUIRES(scheduling_lock);
  // free_data's general case: every copy the run owns, on devices and host, and value forms.
  void free_copies(DataRun &data, Deferred &deferred) GF_REQUIRES(scheduling_lock);
  // Movement events (movement_events.cpp): a copy's start time, read only while someone
  // listens, and the event of its end, delivered once the mutex is released.
  Clock::time_point movement_began() const;
  void report_movement(gf_event_kind kind, const RunState &run, DataIndex d, SpaceId from,
                       SpaceId to, bool ok, Clock::time_point began, Deferred &deferred)
      GF_REQUIRES(scheduling_lock);

  DeviceBackend &backend_;
  const std::vector<std::unique_ptr<WorkerState>> &workers_;
  Notifier &notifier_;
  MovementSink &sink_;
  const double spill_threshold_;
  std::vector<WorkerState *> space_owner_;  // device space -> its GPU worker; fixed at start
  const EventHub *events_ = nullptr;
  uint64_t in_flight_ GF_GUARDED_BY(scheduling_lock) = 0;
  uint64_t lru_clock_ GF_GUARDED_BY(scheduling_lock) = 0;
  Totals totals_ GF_GUARDED_BY(scheduling_lock);
};

}  // namespace gf
