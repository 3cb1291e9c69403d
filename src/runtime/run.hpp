// The caller's run: what a gf_run handle holds. Three kinds stand behind it: a LocalRun, whose
// tasks this process's scheduler runs (runtime/local_run.hpp); a ServiceRun, a graph that runs
// inside the node's service and whose results come back over the data plane
// (pool/service_run.hpp); and a SplitRun, a graph split between the two (pool/split_run.hpp). The C
// shims only see this interface, and it speaks its own records rather than the scheduler's
// snapshots: runs that finish elsewhere do not depend on the scheduler.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "gpuflow.h"
#include "graph/graph.hpp"

namespace gf {

// A task of a run, as gf_run_task_state/_error/_attempts/_worker report it.
struct TaskRecord {
  gf_task_state state = GF_TASK_WAITING;
  uint32_t attempts = 0;
  uint32_t worker = 0;
  const char *error = "";  // "" unless settled failed or cancelled; stable for the run's life
};

// A run's counters, as gf_run_stats reports them.
struct RunStats {
  uint64_t tasks = 0, succeeded = 0, failed = 0, cancelled = 0, attempts = 0, transfers = 0,
           bytes_transferred = 0;
  double elapsed_s = 0;
};

class Run {
 public:
  Run() = default;
  virtual ~Run() = default;
  Run(const Run &) = delete;
  Run &operator=(const Run &) = delete;

  virtual const Graph &graph() const = 0;
  virtual gf_run_where where() const = 0;
  // Names the caller's handle and installs the completion callback (before the run starts).
  virtual void attach(gf_run *handle, const gf_submit_options &options) = 0;
  // Starts the run, once attached (PoolCore::start); its completion may be published before this
  // returns. Throws what keeps it from starting (a refusal, a pool shutting down).
  virtual void start() = 0;
  // Blocks until the run finished or timeout (negative: none); true when finished.
  virtual bool wait(int64_t timeout_ms) = 0;
  virtual gf_run_state state() = 0;
  virtual int fd() = 0;  // readable once the run has finished
  virtual void cancel() = 0;
  // The caller dropped its handle: cancel, release, and run `forget` once the completion
  // callback (if any, and still due) has returned.
  virtual void release(std::function<void()> forget) = 0;
  virtual TaskRecord task(TaskIndex t) = 0;
  virtual RunStats snapshot() = 0;
  // "<first failed task> failed: <its error> (N task(s) failed in all)".
  virtual std::string failure_summary() = 0;
  // Copies buffer `d` to dst (only its size when dst is null) and returns its size.
  virtual uint64_t read_buffer(DataIndex d, void *dst, uint64_t capacity) = 0;
  virtual void *read_value(DataIndex d) = 0;
};

}  // namespace gf
