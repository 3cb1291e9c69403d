// A worker's threads. Each loops: take the scheduler mutex, report the last batch and pick the
// next (Scheduler::next_batch), release it, run the bodies. A GPU worker's threads run GPU bodies
// through the device backend, bound to its device.
#pragma once

#include <thread>
#include <vector>

#include "runtime/events.hpp"
#include "scheduler/scheduler.hpp"

namespace gf {

class Worker {
 public:
  Worker(Scheduler &scheduler, WorkerState &state);
  ~Worker();
  Worker(const Worker &) = delete;
  Worker &operator=(const Worker &) = delete;

  void start();
  void join();

 private:
  void thread_main(uint32_t thread);
  // Runs one body. A GPU body's dispatch is handed off: it finishes when its stream has.
  void execute(Dispatch &dispatch, void *stream);
  void emit_task_event(const Dispatch &dispatch, gf_event_kind kind, EventHub &events);

  Scheduler &scheduler_;
  WorkerState &state_;
  std::vector<std::thread> threads_;
};

}  // namespace gf
