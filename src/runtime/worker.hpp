// A worker's threads. Each loops: take the scheduler mutex, report the last batch and pick the
// next (Scheduler::next_batch), release it, run the bodies. A GPU worker's threads run GPU bodies
// through the device backend, bound to its device.
//
// A body that blocks waiting for another run of the same pool steps aside (StepAside): a spare
// thread takes its place for the wait, as Dask's secede/rejoin, so nested runs cannot starve the
// pool; once the wait is over the worker retires one thread at its next batch boundary.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "core/events.hpp"
#include "runtime/step_aside.hpp"
#include "scheduler/scheduler.hpp"

namespace gf {

class Worker {
 public:
  Worker(Scheduler &scheduler, WorkerState &state, EventHub &events);
  ~Worker();
  Worker(const Worker &) = delete;
  Worker &operator=(const Worker &) = delete;

  void start();
  void join();

  // True on a thread of any worker driven by `scheduler` (a task body, or code it calls).
  static bool on_thread_of(const Scheduler &scheduler);
  // The run whose body is executing on this thread, or null.
  static const RunState *running_run();

  // What one of the worker's threads runs bodies with.
  struct ThreadContext {
    void *stream = nullptr;             // a GPU worker's stream for this thread
    const RunState *running = nullptr;  // the run of the body executing (running_run())
  };

 private:
  friend class StepAside;
  struct Thread {
    std::thread thread;
    bool exited = false;
  };
  void spawn_locked();  // threads_mu_ held
  void thread_main(uint32_t thread);
  // Runs the bodies of a batch, timing them (TaskAttempt::seconds), then reports their finishes.
  void run_batch(Batch &batch, ThreadContext &thread);
  // Whether two tasks learn into the same duration estimate.
  static bool same_cost(const TaskAttempt &a, const TaskAttempt &b);
  // Runs one body, which starts at `start` (the previous body's end, or the batch's start), and
  // returns when it ended; untimed (a CPU body only), returns `start` and leaves its time to the
  // caller. A GPU body's attempt is handed off: it finishes when its stream has.
  Clock::time_point execute(TaskAttempt &attempt, ThreadContext &thread, Clock::time_point start,
                            bool timed = true);
  // `at`: when it happened (a clock reading the worker took anyway).
  void emit_task_event(const TaskAttempt &attempt, gf_event_kind kind, EventHub &events,
                       Clock::time_point at);
  gf_event task_event(const TaskAttempt &attempt, gf_event_kind kind, const EventHub &events,
                      Clock::time_point at) const;
  // The finishes of a CPU worker's batch, after its last body returned.
  void emit_finished(const Batch &batch);
  FinishedTask finished_task(const TaskAttempt &attempt, Clock::time_point at) const;
  bool take_retirement();

  Scheduler &scheduler_;
  WorkerState &state_;
  EventHub &events_;
  std::mutex threads_mu_;
  std::vector<Thread> threads_;  // guarded by threads_mu_
  bool joining_ = false;         // guarded by threads_mu_
  std::atomic<int> retire_{0};   // threads to retire: waits that stepped aside are over
};

}  // namespace gf
