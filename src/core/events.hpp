// The pool's event stream: what happens to tasks on workers, with timestamps, delivered to one
// subscriber (gf_pool_set_event_callback), and task finishes, in compact form, to one in-process
// tap (the dashboard). Progress displays, traces and metrics all read this one stream. With
// nobody listening, emitting costs one relaxed atomic load.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "core/clock.hpp"
#include "gpuflow.h"

namespace gf {

// A finished task as the in-process tap sees it: what per-key statistics need, and no strings,
// so that a watched pool pays a few stores per task rather than building a public gf_event.
struct FinishedTask {  // no member initializers: workers fill arrays of these per batch
  static constexpr uint32_t kNoCostId = UINT32_MAX;
  uint32_t worker;
  // The scheduler's id of the task's cost key (Scheduler::cost_key_name) when the key was derived
  // from the task, else kNoCostId: a key the task chose (Python's are qualified names) says less
  // to a person than the name's prefix.
  uint32_t cost_id;
  const char *name;  // the task's where cost_id is kNoCostId, else null; valid during the call
  bool ok;
  double end_s;  // the hub's clock (EventHub::time_s)
  double duration_s;
  double queue_wait_s;
};

// An in-process listener beside the public subscriber (the dashboard's collector). It is called
// on worker threads, so it must be quick and never block.
class EventTap {
 public:
  virtual ~EventTap() = default;
  // Finished tasks of one worker, in order: a CPU worker's batch together, a GPU task alone.
  virtual void on_finished(const FinishedTask *tasks, size_t count) = 0;
};

class EventHub {
 public:
  void subscribe(gf_event_fn fn, void *user_data);
  // Sets the tap (nullptr: none). A call already under way may still finish after this returns:
  // every tap ever set is kept alive with the hub, so the hot path reads one atomic pointer and
  // takes no lock and no reference count.
  void set_tap(std::shared_ptr<EventTap> tap);
  // Someone listens: the public subscriber, the tap or both.
  bool active() const { return active_.load(std::memory_order_relaxed); }
  bool has_subscriber() const { return has_subscriber_.load(std::memory_order_relaxed); }
  EventTap *tap() const { return tap_.load(std::memory_order_acquire); }
  double now_s() const { return seconds_between(epoch_, Clock::now()); }
  double time_s(Clock::time_point t) const { return seconds_between(epoch_, t); }
  // Fills struct_size and delivers the event to the public subscriber, if there is one.
  void emit(gf_event &event) const;
  // The same for several events of one worker.
  void emit_batch(gf_event *events, size_t count) const;

 private:
  struct Subscriber {
    gf_event_fn fn;
    void *user_data;
  };
  Clock::time_point epoch_ = Clock::now();
  std::atomic<bool> active_{false};
  mutable std::mutex mu_;
  std::shared_ptr<const Subscriber> subscriber_;
  std::atomic<bool> has_subscriber_{false};
  std::atomic<EventTap *> tap_{nullptr};
  std::vector<std::shared_ptr<EventTap>> taps_;  // every tap set so far (see set_tap)
};

}  // namespace gf
