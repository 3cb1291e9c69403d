// The caller's run: what a gf_run handle holds. It keeps its pool alive, and gives the caller the
// future (wait, poll, descriptor, completion callback) and the scheduler's snapshots of the run's
// state, which the scheduler alone changes (scheduler/run_state.hpp).
#pragma once

#include <functional>
#include <memory>

#include "gpuflow.h"
#include "scheduler/run_state.hpp"

namespace gf {

class PoolCore;
class Scheduler;

class Run {
 public:
  Run(std::shared_ptr<PoolCore> pool, Scheduler &scheduler, std::shared_ptr<RunState> state)
      : pool_(std::move(pool)), scheduler_(scheduler), state_(std::move(state)) {}
  Run(const Run &) = delete;
  Run &operator=(const Run &) = delete;

  Scheduler &scheduler() { return scheduler_; }
  RunState &state() { return *state_; }
  const Graph &graph() const { return state_->graph(); }

  // Names the caller's handle and installs the completion callback (before the run starts).
  void attach(gf_run *handle, const gf_submit_options &options);
  // Blocks until the run finished or timeout (negative: none); true when finished. A body on one
  // of the pool's worker threads steps aside while it waits (runtime/worker.hpp); one waiting
  // for its own run fails with GF_ERR_STATE.
  bool wait(int64_t timeout_ms);
  // The caller dropped its handle: cancel, release, and run `forget` once the completion
  // callback (if any, and still due) has returned.
  void release(std::function<void()> forget);

 private:
  std::shared_ptr<PoolCore> pool_;  // a run keeps its pool alive; the pool never its runs
  Scheduler &scheduler_;
  std::shared_ptr<RunState> state_;
};

}  // namespace gf
