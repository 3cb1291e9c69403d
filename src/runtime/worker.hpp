// A worker's threads. Each loops: take the scheduler mutex, report the last batch and pick the
// next (Scheduler::next_batch), release it, run the bodies. A GPU worker's threads run GPU bodies
// through the device backend, bound to its device.
#pragma once

#include <thread>
#include <vector>

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
  void thread_main();
  void execute(Dispatch &dispatch);

  Scheduler &scheduler_;
  WorkerState &state_;
  std::vector<std::thread> threads_;
};

}  // namespace gf
