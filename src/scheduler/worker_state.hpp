// What the scheduler knows about one worker: its kind, memory space, ledger and queues. Guarded
// by the scheduler mutex. The worker's threads (runtime/worker.cpp) only ever reach it through
// the scheduler's calls: assign, finish, transfer arrived.
#pragma once

#include <condition_variable>
#include <map>
#include <string>
#include <vector>

#include "devices/backend.hpp"
#include "scheduler/device_memory.hpp"
#include "scheduler/ledger.hpp"
#include "scheduler/ready_queue.hpp"

namespace gf {

struct TaskRef {
  RunState *run;
  TaskIndex task;
};

struct WorkerState {
  uint32_t index = 0;
  gf_worker_kind kind = GF_WORKER_CPU;
  int device = -1;
  SpaceId space = kHostSpace;
  uint32_t threads = 1;
  bool emulated = false;
  std::string name;
  Ledger ledger;

  ReadyQueue ready;               // inputs present: may start once resources fit
  std::vector<TaskRef> fetching;  // placed here, inputs still moving
  double backlog_s = 0;           // estimated seconds of queued and running work, all threads
  uint32_t running = 0;           // tasks dispatched to its threads and not yet finished
  uint32_t idle_threads = 0;      // threads asleep on `wake`
  uint32_t wakes_pending = 0;     // wake_one() calls no thread has left its wait for yet
  uint64_t batches = 0;           // times its threads took tasks from its queue (pick)
  // A connected pool's device worker starts tasks only while the service has granted it the
  // device (scheduler/grants.cpp); embedded pools own their devices and are always granted.
  bool granted = true;
  DeviceMemory memory;  // device workers: their device's memory
  std::condition_variable wake;

  // Wakes a sleeping thread unless every sleeping one has been woken already and not yet got
  // the mutex back (placing a slice of a wide graph's roots signalled the same sleeper for each
  // root: 2 % of its submit). The caller holds the scheduler's mutex.
  // Returns whether it signalled.
  bool wake_one() {
    if (idle_threads <= wakes_pending) return false;
    ++wakes_pending;
    wake.notify_one();
    return true;
  }
  // A thread left its wait (woken, spuriously or not): one wake fewer is on its way. Returns
  // whether one was.
  bool woke() {
    if (wakes_pending == 0) return false;
    --wakes_pending;
    return true;
  }
};

}  // namespace gf
