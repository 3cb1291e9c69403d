// What the scheduler knows about one worker: what it is (fixed once the pool is built, read by
// any thread) and its ledger, queues and counters (under the scheduler's mutex). The worker's
// threads (runtime/worker.cpp) reach the latter only through the scheduler's calls.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "devices/backend.hpp"
#include "scheduler/device_memory.hpp"
#include "scheduler/ledger.hpp"
#include "scheduler/ready_queue.hpp"
#include "scheduler/scheduling_lock.hpp"

namespace gf {

struct TaskRef {
  RunState *run;
  TaskIndex task;
};

struct WorkerState {
  // ---- What it is ----
  uint32_t index = 0;
  gf_worker_kind kind = GF_WORKER_CPU;
  int device = -1;
  SpaceId space = kHostSpace;
  uint32_t threads = 1;
  bool emulated = false;
  std::string name;

  // ---- Under the scheduler's mutex (the pool fills the ledger's capacities before) ----
  Ledger ledger GF_GUARDED_BY(scheduling_lock);
  ReadyQueue ready GF_GUARDED_BY(scheduling_lock);  // inputs present: may start once they fit
  std::vector<TaskRef> fetching GF_GUARDED_BY(scheduling_lock);  // placed, inputs moving
  // Estimated seconds of queued and running work, all threads.
  double backlog_s GF_GUARDED_BY(scheduling_lock) = 0;
  // Tasks started on its threads and not finished yet.
  uint32_t running GF_GUARDED_BY(scheduling_lock) = 0;
  // Times its threads took tasks from its queue (pick).
  uint64_t batches GF_GUARDED_BY(scheduling_lock) = 0;
  // A connected pool's device worker starts tasks only while the service has granted it the
  // device (scheduler/grants.cpp); embedded pools own their devices and are always granted.
  bool granted GF_GUARDED_BY(scheduling_lock) = true;
  DeviceMemory memory GF_GUARDED_BY(scheduling_lock);  // device workers: their device's memory
};

}  // namespace gf
