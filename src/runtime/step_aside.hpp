// Stepping aside for a blocking wait (runtime/worker.hpp says why): declared apart from the
// worker so that runs finished elsewhere (runtime/published_run.hpp) can wait without the
// scheduler's header.
#pragma once

namespace gf {

class Scheduler;
class Worker;

// Scope of a blocking wait made by a body on one of `scheduler`'s worker threads: a spare thread
// replaces this one meanwhile. Does nothing on any other thread.
class StepAside {
 public:
  explicit StepAside(const Scheduler &scheduler);
  ~StepAside();
  StepAside(const StepAside &) = delete;
  StepAside &operator=(const StepAside &) = delete;

 private:
  Worker *worker_ = nullptr;
};

}  // namespace gf
