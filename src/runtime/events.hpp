// The pool's event stream: what happens to tasks on workers, with timestamps, delivered to one
// subscriber (gf_pool_set_event_callback). Progress displays, traces and metrics all read this
// one stream. With no subscriber, emitting costs one relaxed atomic load.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "core/clock.hpp"
#include "gpuflow.h"

namespace gf {

class EventHub {
 public:
  void subscribe(gf_event_fn fn, void *user_data);
  bool active() const { return active_.load(std::memory_order_relaxed); }
  double now_s() const { return seconds_between(epoch_, Clock::now()); }
  // Fills struct_size and delivers the event when someone listens.
  void emit(gf_event &event) const;

 private:
  struct Subscriber {
    gf_event_fn fn;
    void *user_data;
  };
  Clock::time_point epoch_ = Clock::now();
  std::atomic<bool> active_{false};
  mutable std::mutex mu_;
  std::shared_ptr<const Subscriber> subscriber_;
};

}  // namespace gf
