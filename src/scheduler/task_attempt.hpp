// An attempt of a task as its worker thread holds it, and the worker thread's batch of them.
// The scheduler fills an attempt under its mutex (which task, the inputs its body may read); the
// worker thread runs the body and fills in the results (outputs, outcome, times) without the
// mutex; the scheduler settles it when the thread reports the batch. An attempt may also be added
// by the worker thread itself: a successor it runs directly (scheduler/direct_run.hpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/clock.hpp"
#include "scheduler/ready_queue.hpp"
#include "scheduler/run_state.hpp"

namespace gf {

class Notifier;

// A task handed to a worker thread, with what its body may touch resolved under the lock.
struct TaskAttempt {
  RunState *run = nullptr;
  TaskIndex task = kNoIndex;
  uint32_t attempt = 0;
  std::vector<std::pair<const void *, uint64_t>> inputs;  // pointer (or value), size
  // Filled by the worker thread:
  struct Output {
    void *ptr = nullptr;
    uint64_t size = 0;
    bool set = false;
    bool charged_at_run = false;  // dynamic size or device value: charged while the body ran
    // A successor run directly later in this batch read it from here (set with that successor).
    bool read_in_batch = false;
    gf_destroy_fn value_destroy = nullptr;
    ValueOps value_ops;  // a device value's (gf_task_ctx_set_device_value)
  };
  std::vector<Output> outputs;
  enum class Outcome : uint8_t {
    kPending,    // its body has not run yet
    kSucceeded,  // the body returned 0 and set every output
    kFailed,     // anything else: `error` says what
    kNotRun,     // its run was cancelled before the body started
    kHandedOff,  // a GPU body's device work is under way: it completes through finish_async
  };
  Outcome outcome = Outcome::kPending;
  bool succeeded() const { return outcome == Outcome::kSucceeded; }
  std::string error;
  double seconds = 0;
  bool timed = true;  // seconds measured (tiny tasks are timed one batch in kTimedEvery)
  bool tiny = false;  // learnt to take under kTinyTask: two clock readings are much of that
  Clock::time_point ready_at{};  // entered the ready queue (zero: not measured)
  double queue_wait_s = 0;       // ready_at to the body's start (set by the worker)
  Clock::time_point ended_at{};  // when the body returned (CPU bodies; set by the worker)
  // Added to the batch by its worker thread, without the mutex, once every predecessor of it
  // had succeeded (scheduler/direct_run.hpp). The scheduler adopts it as started when it
  // completes the batch, after those predecessors.
  bool run_directly = false;
  // Whether its request was charged for it (and goes back when it ends): false for the later
  // tasks of a CPU batch that share the first's charge (picking.cpp). Set when it starts.
  bool holds_request = true;

  // Made ready for `task`'s attempt, under the scheduler's lock: which task, room for the
  // inputs it reads (filled there). What the body's thread fills is cleared by that thread
  // (clear_results), outside the lock: the fields are many, and pick() hands out every task.
  void assign(RunState *of, TaskIndex t, uint32_t attempt_number, uint32_t input_count,
              Clock::time_point ready, bool is_tiny) {
    run = of;
    task = t;
    attempt = attempt_number;
    inputs.resize(input_count);
    ready_at = ready;
    tiny = is_tiny;
  }
  // Clears what the previous task left in the fields the worker thread fills, and makes room for
  // `output_count` outputs (the vectors keep their capacity). Called by the worker thread before
  // the body runs; `run_directly` is the scheduler's to clear (complete_batch).
  void clear_results(uint32_t output_count) {
    outputs.clear();
    if (output_count) outputs.resize(output_count);
    outcome = Outcome::kPending;
    if (!error.empty()) error.clear();
    seconds = 0;
    timed = true;
    queue_wait_s = 0;
    ended_at = {};
  }
};

// A worker thread's batch; its attempts (and their vectors) are reused between batches.
struct Batch {
  std::vector<TaskAttempt> items;
  size_t count = 0;
  uint32_t untimed = 0;  // batches of tiny tasks run untimed since the last timed one
  // Set when the batch is picked: whether its thread may run successors of its tasks directly
  // (DirectRuns::after_success), and the task first in the worker's queue then, which a successor
  // run directly must not overtake.
  bool may_continue = false;
  // The pool's count of spinning CPU threads (Notifier::spinning_cpu_threads): while any spins,
  // a successor other than a chain's next link is left to the scheduler, which hands it on.
  const Notifier *notifier = nullptr;
  bool has_bar = false;
  QueuedTask bar{};
  // The request the batch's first task was charged on this CPU worker (picking.cpp), which
  // covers each of its tasks in turn: successors of that run and request may run directly too.
  const RunState *charged_run = nullptr;
  RequestId charged_request = kEmptyRequest;
  // Whether this worker may run tasks without a request (kEmptyRequest) of `plain_run`, as
  // looked up for the last successor considered (reset when the batch is picked).
  const RunState *plain_run = nullptr;
  bool plain_here = false;
  // pick()'s scratch: tasks it looked past, put back afterwards (here, not thread_local: pick
  // runs once per batch, and TLS in a shared library costs a call each time).
  std::vector<QueuedTask> passed_over;
};

}  // namespace gf
