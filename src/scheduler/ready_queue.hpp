// A worker's queue of tasks that are ready to start: highest user priority first, then the older
// run, then the graph's own order (rank), which finishes started branches before opening new ones.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/clock.hpp"
#include "graph/graph.hpp"

namespace gf {

class RunState;

struct QueuedTask {
  int32_t priority;
  uint32_t rank;
  uint64_t run_sequence;
  RunState *run;
  TaskIndex task;
  Clock::time_point ready_at;  // when it entered the queue: its queue wait ends at dispatch
};

// True when a should run after b.
inline bool runs_later(const QueuedTask &a, const QueuedTask &b) {
  if (a.priority != b.priority) return a.priority < b.priority;
  if (a.run_sequence != b.run_sequence) return a.run_sequence > b.run_sequence;
  return a.rank > b.rank;
}

class ReadyQueue {
 public:
  void push(const QueuedTask &entry) {
    heap_.push_back(entry);
    std::push_heap(heap_.begin(), heap_.end(), runs_later);
  }
  const QueuedTask &top() const { return heap_.front(); }
  QueuedTask pop() {
    std::pop_heap(heap_.begin(), heap_.end(), runs_later);
    QueuedTask entry = heap_.back();
    heap_.pop_back();
    return entry;
  }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // Drops every entry of one run (cancellation), calling removed(task) for each; O(size).
  template <class Removed>
  void remove_run(const RunState *run, Removed removed) {
    auto end = std::partition(heap_.begin(), heap_.end(),
                              [run](const QueuedTask &e) { return e.run != run; });
    if (end == heap_.end()) return;
    for (auto it = end; it != heap_.end(); ++it) removed(it->task);
    heap_.erase(end, heap_.end());
    std::make_heap(heap_.begin(), heap_.end(), runs_later);
  }
  void remove_run(const RunState *run) {
    remove_run(run, [](TaskIndex) {});
  }

 private:
  std::vector<QueuedTask> heap_;
};

}  // namespace gf
