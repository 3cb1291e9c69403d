// Watching a scheduler's tasks, on the model of Taskflow's tf::ObserverInterface: an observer is
// registered with Scheduler::add_observer, which sets it up with the number of workers it will
// hear about (so it can size per-worker state before the first task), and stays registered while
// the returned handle lives. While any observer is registered, the scheduler measures what only
// watchers need: each task's wait in its worker's ready queue (TaskAttempt::queue_wait_s, two clock
// reads per task), which the pool's event stream (core/events.hpp) then carries as
// gf_event.queue_wait_s and FinishedTask::queue_wait_s. What happens to each task reaches
// observers through that stream; the scheduler itself calls no observer per task, and with none
// registered it pays one relaxed atomic load per task queued.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace gf {

class SchedulerObserver {
 public:
  virtual ~SchedulerObserver() = default;
  // Once, from Scheduler::add_observer, before any task is reported to it: workers are numbered
  // 0 .. workers - 1 (FinishedTask::worker, gf_event.worker).
  virtual void set_up(size_t workers) = 0;
};

// Keeps one observer registered while it lives; move-only. It must not outlive the scheduler
// that made it (the dashboard and the pool hold theirs beside the pool that owns the scheduler).
class ObserverHandle {
 public:
  ObserverHandle() = default;
  ObserverHandle(ObserverHandle &&other) noexcept
      : observers_(std::exchange(other.observers_, nullptr)),
        observer_(std::move(other.observer_)) {}
  ObserverHandle &operator=(ObserverHandle &&other) noexcept {
    if (this != &other) {
      reset();
      observers_ = std::exchange(other.observers_, nullptr);
      observer_ = std::move(other.observer_);
    }
    return *this;
  }
  ObserverHandle(const ObserverHandle &) = delete;
  ObserverHandle &operator=(const ObserverHandle &) = delete;
  ~ObserverHandle() { reset(); }

  // Unregisters the observer now (nothing when the handle holds none).
  void reset() {
    if (observers_) observers_->fetch_sub(1, std::memory_order_relaxed);
    observers_ = nullptr;
    observer_.reset();
  }
  explicit operator bool() const { return observers_ != nullptr; }

 private:
  friend class Scheduler;
  ObserverHandle(std::atomic<uint32_t> &observers, std::shared_ptr<SchedulerObserver> observer)
      : observers_(&observers), observer_(std::move(observer)) {
    observers_->fetch_add(1, std::memory_order_relaxed);
  }

  std::atomic<uint32_t> *observers_ = nullptr;  // the scheduler's count of registered observers
  std::shared_ptr<SchedulerObserver> observer_;
};

}  // namespace gf
