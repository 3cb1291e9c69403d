// Where a ready task should run: the eligible worker with the earliest estimated finish time,
// i.e. its backlog, plus the time to move the inputs it does not hold, plus the task itself.
// Pure function of its inputs, so placement is tested exactly, without threads or clocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace gf {

struct PlacementOption {
  uint32_t worker;
  double backlog_s;   // estimated work already queued or running there, per thread
  double transfer_s;  // estimated time to bring the task's missing inputs there
  double compute_s;   // estimated duration of the task's body of that worker's kind
};

// Index into `options` (non-empty) of the worker to use. The candidate with the least data to
// move (ties: `preferred_worker`, the worker that just produced an input or took the previous
// root of the graph) keeps the task unless it would finish clearly later than the best: more than
// twice the best finish time plus `tolerance_s`. Otherwise the earliest finish wins (ties: first).
// Moving work to a merely less busy worker is left to stealing, which happens only when a worker
// is really idle.
size_t choose_placement(std::span<const PlacementOption> options, uint32_t preferred_worker,
                        double tolerance_s = 0);

}  // namespace gf
