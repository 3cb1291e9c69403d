// The pool's event stream: what happens to tasks on workers, with timestamps, delivered to one
// subscriber (gf_pool_set_event_callback). Progress displays, traces and metrics all read this
// one stream. With no subscriber, emitting costs one relaxed atomic load.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "core/clock.hpp"
#include "gpuflow.h"

namespace gf {

// An in-process listener beside the public subscriber (the dashboard's collector): it sees the
// same events, on the same threads, under the same rules (quick, never blocking).
class EventTap {
 public:
  virtual ~EventTap() = default;
  virtual void on_event(const gf_event &event) = 0;
  // The finishes of one batch of one worker's tasks, together (one lock where a tap needs one).
  virtual void on_events(const gf_event *events, size_t count) {
    for (size_t i = 0; i < count; ++i) on_event(events[i]);
  }
  // False: the tap needs no GF_EVENT_TASK_STARTED (then none is built unless the public
  // subscriber wants it).
  virtual bool wants_started() const { return true; }
};

class EventHub {
 public:
  void subscribe(gf_event_fn fn, void *user_data);
  // Sets the tap (nullptr: none). A call already under way may still finish after this returns:
  // every tap ever set is kept alive with the hub, so the hot path reads one atomic pointer and
  // takes no lock and no reference count.
  void set_tap(std::shared_ptr<EventTap> tap);
  bool active() const { return active_.load(std::memory_order_relaxed); }
  bool started_active() const { return started_active_.load(std::memory_order_relaxed); }
  double now_s() const { return seconds_between(epoch_, Clock::now()); }
  double time_s(Clock::time_point t) const { return seconds_between(epoch_, t); }
  // Fills struct_size and delivers the event when someone listens.
  void emit(gf_event &event) const;
  // The same for several events of one worker, none of them GF_EVENT_TASK_STARTED.
  void emit_batch(gf_event *events, size_t count) const;

 private:
  struct Subscriber {
    gf_event_fn fn;
    void *user_data;
  };
  Clock::time_point epoch_ = Clock::now();
  std::atomic<bool> active_{false};
  std::atomic<bool> started_active_{false};
  mutable std::mutex mu_;
  std::shared_ptr<const Subscriber> subscriber_;
  std::atomic<bool> has_subscriber_{false};
  std::atomic<EventTap *> tap_{nullptr};
  std::vector<std::shared_ptr<EventTap>> taps_;  // every tap set so far (see set_tap)
};

}  // namespace gf
