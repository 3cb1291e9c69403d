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
  Clock::time_point ready_at;  // when it entered the queue: its queue wait ends at dispatch
  TaskIndex task;
  // How many tasks this entry stands for: task, task + 1, ... ranked rank, rank + 1, ... of one
  // run. Longer entries start in start() (Scheduler::queue_plain_roots, through push_following),
  // which vouches that their tasks are alike; pop_span and steals carry pieces of them.
  uint32_t span = 1;
};

// True when b should run before the last task of span a.
inline bool ends_later(const QueuedTask &a, const QueuedTask &b) {
  if (a.priority != b.priority) return a.priority < b.priority;
  if (a.run_sequence != b.run_sequence) return a.run_sequence > b.run_sequence;
  return a.rank + (a.span - 1) > b.rank;
}

// The entry for the last task of `entry`'s span.
inline QueuedTask last_of(QueuedTask entry) {
  entry.task += entry.span - 1;
  entry.rank += entry.span - 1;
  entry.span = 1;
  return entry;
}

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
// be, without a heap's O(log n) comparisons per task.
//
// Consecutive alike tasks (a wide graph's roots) share one entry, a span: queueing, stealing
// and picking them cost one entry per span, not per task. A span's tasks have
// consecutive ranks in one run, so no other task of any queue runs between two of them: the
// span moves through the order as one block. size() counts tasks.
class ReadyQueue {
 public:
  void push(const QueuedTask &entry) {
    tasks_ += entry.span;
    if (head_ == sorted_.size() || !ends_later(sorted_.back(), entry)) {
      sorted_.push_back(entry);
    } else {
      heap_.push_back(entry);
      std::push_heap(heap_.begin(), heap_.end(), runs_later);
    }
  }
  // push(), joining the entry (a span of one or more) to the span pushed last when its first
  // task is that span's next (same run, priority and queueing time; the next task and rank).
  // The caller vouches that its tasks are alike the span's in everything a span is used for (the
  // same body, request and estimate, no inputs): pick and steal treat a span's tasks as one.
  void push_following(const QueuedTask &entry) {
    if (head_ < sorted_.size()) {
      QueuedTask &back = sorted_.back();
      if (back.run == entry.run && back.run_sequence == entry.run_sequence &&
          back.priority == entry.priority && back.ready_at == entry.ready_at &&
          back.task + back.span == entry.task && back.rank + back.span == entry.rank) {
        back.span += entry.span;
        tasks_ += entry.span;
        return;
      }
    }
    push(entry);
  }
  // The entry whose first task runs next (its span may be longer than one).
  const QueuedTask &top() const { return from_heap() ? heap_.front() : sorted_[head_]; }
  // Takes the next task to run.
  QueuedTask pop() { return pop_span(1); }
  // Takes up to `most` (at least 1) of the next tasks to run, all from the front entry's span:
  // one entry with their span.
  QueuedTask pop_span(uint32_t most) {
    const bool heap = from_heap();
    QueuedTask &front = heap ? heap_.front() : sorted_[head_];
    if (front.span > most) {
      QueuedTask taken = front;
      taken.span = most;
      tasks_ -= most;
      if (heap) {  // its key grows: sifted again (rare: spans are queued in order)
        std::pop_heap(heap_.begin(), heap_.end(), runs_later);
        advance(heap_.back(), most);
        std::push_heap(heap_.begin(), heap_.end(), runs_later);
      } else {
        advance(front, most);  // still before the next entry: spans are blocks
      }
      return taken;
    }
    tasks_ -= front.span;
    if (heap) {
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
  bool empty() const { return tasks_ == 0; }
  size_t size() const { return tasks_; }
  // Drops every task of one run (cancellation), calling removed(task) for each; O(size).
  template <class Removed>
  void remove_run(const RunState *run, Removed removed) {
    auto other = [run](const QueuedTask &e) { return e.run != run; };
    auto drop = [&](auto from, auto to) {
      for (auto it = from; it != to; ++it) {
        for (uint32_t k = 0; k < it->span; ++k) removed(it->task + k);
        tasks_ -= it->span;
      }
    };
    sorted_.erase(sorted_.begin(), sorted_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
    // Stable: the sorted run stays sorted.
    auto end = std::stable_partition(sorted_.begin(), sorted_.end(), other);
    drop(end, sorted_.end());
    sorted_.erase(end, sorted_.end());
    end = std::partition(heap_.begin(), heap_.end(), other);
    if (end == heap_.end()) return;
    drop(end, heap_.end());
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
  static void advance(QueuedTask &entry, uint32_t by) {
    entry.task += by;
    entry.rank += by;
    entry.span -= by;
  }

  std::vector<QueuedTask> sorted_;  // [head_, end) in running order
  size_t head_ = 0;
  std::vector<QueuedTask> heap_;
  size_t tasks_ = 0;
};

}  // namespace gf
