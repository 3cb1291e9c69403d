// What the scheduler knows about one worker: its kind, memory space, ledger and queues. Guarded
// by the scheduler mutex. The worker's threads (runtime/worker.cpp) only ever reach it through
// the scheduler's calls: assign, finish, transfer arrived.
#pragma once

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
  uint64_t batches = 0;           // times its threads took tasks from its queue (pick)
  // A connected pool's device worker starts tasks only while the service has granted it the
  // device (scheduler/grants.cpp); embedded pools own their devices and are always granted.
  bool granted = true;
  DeviceMemory memory;  // device workers: their device's memory
};

}  // namespace gf
