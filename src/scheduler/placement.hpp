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

// Index into `options` (non-empty) of the earliest finish. Ties go to `preferred_worker` (the
// worker that just produced the task's input and is about to be free), then to the first option.
size_t choose_placement(std::span<const PlacementOption> options, uint32_t preferred_worker);

}  // namespace gf
