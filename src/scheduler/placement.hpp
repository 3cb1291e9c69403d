// Where a ready task should run: the eligible worker with the earliest estimated finish time,
// i.e. its backlog, plus the time to move the inputs it does not hold, plus the task itself.
// Pure function of its inputs, so placement is tested exactly, without threads or clocks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

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

// Appends to `options` the candidates among `workers` that choose_placement could ever return,
// when all of them share one memory space and kind (a pool's CPU workers): they differ only in
// their backlog, so only the first, the least busy (first on ties) and `preferred_worker` can
// win, whatever the other candidates are. Those keep their order, so the choice is the one the
// whole list would give, without weighing every CPU worker for every task.
template <class BacklogOf>
void add_interchangeable(std::vector<PlacementOption> &options, std::span<const uint32_t> workers,
                         BacklogOf backlog_of, uint32_t preferred_worker, double transfer_s,
                         double compute_s) {
  if (workers.empty()) return;
  size_t least = 0, preferred = workers.size();
  double least_backlog = backlog_of(workers[0]);
  for (size_t i = 0; i < workers.size(); ++i) {
    if (workers[i] == preferred_worker) preferred = i;
    if (i == 0) continue;
    const double backlog = backlog_of(workers[i]);
    if (backlog < least_backlog) {
      least = i;
      least_backlog = backlog;
    }
  }
  auto add = [&](size_t i) {
    options.push_back({workers[i], backlog_of(workers[i]), transfer_s, compute_s});
  };
  // In the order they are listed: the first, then the least busy and the preferred one.
  add(0);
  const size_t second = std::min(least, preferred), third = std::max(least, preferred);
  if (second > 0) add(second);
  if (third > second && third < workers.size()) add(third);
}

}  // namespace gf
