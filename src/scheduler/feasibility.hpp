// What a graph asks of the pool, checked once per run before anything starts: each resource
// request resolved against the workers that could ever satisfy it, every task able to run
// somewhere (or refused, naming it and what it lacks), and named kernels and commands bound. A
// part of the scheduler without state of its own: it reads the workers' capacities only, which
// never change once the pool is built, so prepare() calls it outside the mutex.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "scheduler/resource_registry.hpp"
#include "scheduler/run_state.hpp"
#include "scheduler/worker_state.hpp"

namespace gf {

class Feasibility {
 public:
  Feasibility(const ResourceRegistry &registry,
              const std::vector<std::unique_ptr<WorkerState>> &workers, ResourceId gpu_memory)
      : registry_(registry), workers_(workers), gpu_memory_(gpu_memory) {}

  // The graph's requests (by RequestId), each with the workers that could ever meet it.
  std::vector<ResolvedRequest> resolve_requests(const Graph &graph) const
      GF_NO_THREAD_SAFETY_ANALYSIS;
  // Refuses the run (GF_ERR_INFEASIBLE) when some task can run on no worker, naming it.
  void check(const RunState &run) const;
  // Binds the tasks that name a kernel or describe a command to their bodies for this run.
  static void resolve_bodies(RunState &run, const BodyResolvers &bodies);

 private:
  // Why no worker can ever run task t, naming the resource (and a near miss in its name).
  std::string why_infeasible(const RunState &run, TaskIndex t) const GF_NO_THREAD_SAFETY_ANALYSIS;

  const ResourceRegistry &registry_;
  const std::vector<std::unique_ptr<WorkerState>> &workers_;
  const ResourceId gpu_memory_;
};

}  // namespace gf
