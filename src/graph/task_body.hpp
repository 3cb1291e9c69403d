// What runs for a task: a body per worker kind plus the caller's data. A graph gives it directly
// (C callbacks) or by kernel name, resolved against the pool's kernels when the graph is
// submitted; the scheduler only ever sees the resolved form, so adding a kind of body (named
// kernel, external command) never touches placement.
#pragma once

#include <string>

#include "gpuflow.h"

namespace gf {

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

}  // namespace gf
