#include "runtime/local_run.hpp"

#include "core/error.hpp"
#include "runtime/worker.hpp"

namespace gf {

void LocalRun::attach(gf_run *handle, const gf_submit_options &options) {
  state_->handle = handle;
  if (!options.on_complete) return;
  RunState *state = state_.get();
  state_->completion.set_callback(
      [state, handle, callback = options.on_complete, user_data = options.user_data] {
        callback(handle, state->state(), user_data);
      });
}

TaskRecord LocalRun::task(TaskIndex t) {
  const Scheduler::TaskSnapshot s = scheduler_.task_snapshot(*state_, t);
  return TaskRecord{s.state, s.attempts, s.worker, s.error};
}

RunStats LocalRun::snapshot() {
  const Scheduler::RunSnapshot s = scheduler_.run_snapshot(*state_);
  return RunStats{s.tasks,     s.succeeded,         s.failed,   s.cancelled, s.attempts,
                  s.transfers, s.bytes_transferred, s.elapsed_s};
}

bool LocalRun::wait(int64_t timeout_ms) {
  Completion &completion = state_->completion;
  if (completion.published() || completion.in_callback()) return true;
  if (timeout_ms == 0) return false;
  if (Worker::running_run() == state_.get()) {
    fail(GF_ERR_STATE,
         "a task body cannot wait for its own run: the run finishes only after the body returns");
  }
  StepAside aside(scheduler_);
  return completion.wait(timeout_ms);
}

void LocalRun::release(std::function<void()> forget) {
  scheduler_.release_run(*state_);
  // A completion callback may still be due (bodies that were running finish first): the handle
  // stays valid until it has returned, so the callback can use its run as documented. Without
  // a callback the handle goes at once.
  if (state_->completion.has_callback()) {
    state_->completion.when_published(std::move(forget));
  } else {
    forget();
  }
}

}  // namespace gf
