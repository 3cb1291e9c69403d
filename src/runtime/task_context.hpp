// What a running body sees through gf_task_ctx: its inputs in the executing worker's memory,
// its outputs (allocated on demand), where it runs, and a place to say why it failed.
#pragma once

#include <string>

#include "gpuflow.h"
#include "scheduler/scheduler.hpp"

struct gf_task_ctx {
  gf::Scheduler *scheduler;
  gf::WorkerState *worker;
  gf::TaskAttempt *attempt;
  std::string error;
  bool failed = false;
  void *stream = nullptr;  // GPU workers: what the body enqueues on

  const gf::Graph &graph() const { return attempt->run->graph(); }
  const gf::TaskDesc &task() const { return graph().task(attempt->task); }

  void input(const void **ptr, uint64_t *size, uint32_t index) const;
  void *output(uint32_t index, uint64_t size);
  // ops: non-null for gf_task_ctx_set_device_value (charged on a device; see gpuflow.h).
  void set_value(uint32_t index, void *value, gf_destroy_fn destroy, uint64_t size,
                 const gf::ValueOps *ops = nullptr);
  void env(gf_task_env &out) const;
  bool cancelled() const;
};
