#include "runtime/events.hpp"

namespace gf {

void EventHub::subscribe(gf_event_fn fn, void *user_data) {
  auto next = fn ? std::make_shared<const Subscriber>(Subscriber{fn, user_data}) : nullptr;
  std::lock_guard lock(mu_);
  subscriber_ = std::move(next);
  active_.store(subscriber_ != nullptr || tap_ != nullptr, std::memory_order_relaxed);
}

void EventHub::set_tap(std::shared_ptr<EventTap> tap) {
  std::lock_guard lock(mu_);
  tap_ = std::move(tap);
  active_.store(subscriber_ != nullptr || tap_ != nullptr, std::memory_order_relaxed);
}

void EventHub::emit(gf_event &event) const {
  std::shared_ptr<const Subscriber> s;
  std::shared_ptr<EventTap> tap;
  {
    std::lock_guard lock(mu_);
    s = subscriber_;
    tap = tap_;
  }
  event.struct_size = sizeof(gf_event);
  if (tap) tap->on_event(event);
  if (s) s->fn(&event, s->user_data);
}

}  // namespace gf
