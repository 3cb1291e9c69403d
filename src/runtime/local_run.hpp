// A run whose tasks this process's scheduler runs. It keeps its pool alive, and answers from the
// scheduler's snapshots of the run's state, which the scheduler alone changes
// (scheduler/run_state.hpp).
#pragma once

#include <memory>

#include "runtime/run.hpp"
#include "scheduler/run_state.hpp"
#include "scheduler/scheduler.hpp"

namespace gf {

class PoolCore;

class LocalRun final : public Run {
 public:
  LocalRun(std::shared_ptr<PoolCore> pool, Scheduler &scheduler, std::shared_ptr<RunState> state)
      : pool_(std::move(pool)), scheduler_(scheduler), state_(std::move(state)) {}

  RunState &run_state() { return *state_; }
  const Graph &graph() const override { return state_->graph(); }
  gf_run_where where() const override { return GF_RUN_IN_PROCESS; }
  void attach(gf_run *handle, const gf_submit_options &options) override;
  void start() override { scheduler_.start(state_); }
  // A body on one of the pool's worker threads steps aside while it waits
  // (runtime/worker.hpp); one waiting for its own run fails with GF_ERR_STATE.
  bool wait(int64_t timeout_ms) override;
  gf_run_state state() override { return state_->state(); }
  int fd() override { return state_->completion.fd(); }
  void cancel() override { scheduler_.cancel(*state_); }
  void release(std::function<void()> forget) override;
  TaskRecord task(TaskIndex t) override;
  RunStats snapshot() override;
  std::string failure_summary() override { return scheduler_.failure_summary(*state_); }
  uint64_t read_buffer(DataIndex d, void *dst, uint64_t capacity) override {
    return scheduler_.read_buffer(*state_, d, dst, capacity);
  }
  void *read_value(DataIndex d) override { return scheduler_.read_value(*state_, d); }

 private:
  std::shared_ptr<PoolCore> pool_;  // a run keeps its pool alive; the pool never its runs
  Scheduler &scheduler_;
  std::shared_ptr<RunState> state_;
};

}  // namespace gf
