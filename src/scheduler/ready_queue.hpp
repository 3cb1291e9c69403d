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

// Tasks mostly arrive in the order they are to run (a run's roots in rank order, a chain's next
// link, siblings of one finished task): those append to a sorted run, popped from its front in
// O(1) with one comparison. Only an entry that would run before the sorted run's last one goes
// to a heap; the queue yields whichever front runs first, so the order is the heap's alone would
// be (profiled: the heap's comparator was 10 % of a wide graph's time, and O(log n) per task).
class ReadyQueue {
 public:
  void push(const QueuedTask &entry) {
    if (head_ == sorted_.size() || !runs_later(sorted_.back(), entry)) {
      sorted_.push_back(entry);
    } else {
      heap_.push_back(entry);
      std::push_heap(heap_.begin(), heap_.end(), runs_later);
    }
  }
  const QueuedTask &top() const { return from_heap() ? heap_.front() : sorted_[head_]; }
  QueuedTask pop() {
    if (from_heap()) {
      std::pop_heap(heap_.begin(), heap_.end(), runs_later);
      QueuedTask entry = heap_.back();
      heap_.pop_back();
      return entry;
    }
    QueuedTask entry = sorted_[head_++];
    if (head_ == sorted_.size()) {
      sorted_.clear();
      head_ = 0;
    } else if (head_ >= 4096 && head_ * 2 >= sorted_.size()) {
      // Popped entries are dropped in bulk, so the memory of a long queue shrinks as it drains.
      sorted_.erase(sorted_.begin(), sorted_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    return entry;
  }
  bool empty() const { return head_ == sorted_.size() && heap_.empty(); }
  size_t size() const { return sorted_.size() - head_ + heap_.size(); }
  // Drops every entry of one run (cancellation), calling removed(task) for each; O(size).
  template <class Removed>
  void remove_run(const RunState *run, Removed removed) {
    auto other = [run](const QueuedTask &e) { return e.run != run; };
    sorted_.erase(sorted_.begin(), sorted_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
    // Stable: the sorted run stays sorted.
    auto end = std::stable_partition(sorted_.begin(), sorted_.end(), other);
    for (auto it = end; it != sorted_.end(); ++it) removed(it->task);
    sorted_.erase(end, sorted_.end());
    end = std::partition(heap_.begin(), heap_.end(), other);
    if (end == heap_.end()) return;
    for (auto it = end; it != heap_.end(); ++it) removed(it->task);
    heap_.erase(end, heap_.end());
    std::make_heap(heap_.begin(), heap_.end(), runs_later);
  }
  void remove_run(const RunState *run) {
    remove_run(run, [](TaskIndex) {});
  }

 private:
  bool from_heap() const {
    return !heap_.empty() && (head_ == sorted_.size() || runs_later(sorted_[head_], heap_.front()));
  }

  std::vector<QueuedTask> sorted_;  // [head_, end) in running order
  size_t head_ = 0;
  std::vector<QueuedTask> heap_;
};

}  // namespace gf
