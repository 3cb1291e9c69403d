// The caller's run: what a gf_run handle holds. Two kinds stand behind it: a LocalRun, whose
// tasks this process's scheduler runs (runtime/local_run.hpp), and a ServiceRun, a graph that
// runs inside the node's service and whose results come back over the data plane
// (pool/service_run.hpp). The C shims only see this interface.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "gpuflow.h"
#include "graph/graph.hpp"
#include "scheduler/scheduler.hpp"

namespace gf {

class Run {
 public:
  using TaskSnapshot = Scheduler::TaskSnapshot;
  using RunSnapshot = Scheduler::RunSnapshot;

  Run() = default;
  virtual ~Run() = default;
  Run(const Run &) = delete;
  Run &operator=(const Run &) = delete;

  virtual const Graph &graph() const = 0;
  virtual gf_run_where where() const = 0;
  // Names the caller's handle and installs the completion callback (before the run starts).
  virtual void attach(gf_run *handle, const gf_submit_options &options) = 0;
  // Blocks until the run finished or timeout (negative: none); true when finished.
  virtual bool wait(int64_t timeout_ms) = 0;
  virtual gf_run_state state() = 0;
  virtual int fd() = 0;  // readable once the run has finished
  virtual void cancel() = 0;
  // The caller dropped its handle: cancel, release, and run `forget` once the completion
  // callback (if any, and still due) has returned.
  virtual void release(std::function<void()> forget) = 0;
  virtual TaskSnapshot task(TaskIndex t) = 0;
  virtual RunSnapshot snapshot() = 0;
  // "<first failed task> failed: <its error> (N task(s) failed in all)".
  virtual std::string failure_summary() = 0;
  // Copies buffer `d` to dst (only its size when dst is null) and returns its size.
  virtual uint64_t read_buffer(DataIndex d, void *dst, uint64_t capacity) = 0;
  virtual void *read_value(DataIndex d) = 0;
};

}  // namespace gf
