// What runs for a task: a body per worker kind plus the caller's data. A graph gives it directly
// (C callbacks), by kernel name, or as an external command; named kernels and commands are
// resolved when the graph is submitted (kernels against the pool's registry, commands bound to
// the command executor for the run), so the scheduler only ever sees the resolved form and adding
// a kind of body never touches placement.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gpuflow.h"

namespace gf {

class Graph;

struct TaskBody {
  gf_task_fn cpu_fn = nullptr;
  gf_task_fn gpu_fn = nullptr;
  void *user_data = nullptr;

  gf_task_fn for_kind(gf_worker_kind kind) const { return kind == GF_WORKER_CPU ? cpu_fn : gpu_fn; }
};

// Looks up named kernels for a pool. Returns false when nobody registered `name`.
class KernelResolver {
 public:
  virtual ~KernelResolver() = default;
  virtual bool resolve(const std::string &name, TaskBody &out) const = 0;
};

// Binds the external-command tasks of one run to the command executor. The bodies it returns
// point into it (their user_data), so the run keeps it for as long as the run lives.
class CommandResolver {
 public:
  virtual ~CommandResolver() = default;
  // The body of command task `task` of the frozen `graph`.
  virtual TaskBody resolve(const Graph &graph, uint32_t task) = 0;
};

// What a submit resolves the bodies a graph names with. Either may be null when the pool has
// none of that kind; a graph that then names one is refused.
struct BodyResolvers {
  const KernelResolver *kernels = nullptr;    // the pool's, shared by its runs
  std::shared_ptr<CommandResolver> commands;  // this run's
};

}  // namespace gf
