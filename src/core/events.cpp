#include "core/events.hpp"

namespace gf {

void EventHub::subscribe(gf_event_fn fn, void *user_data) {
  auto next = fn ? std::make_shared<const Subscriber>(Subscriber{fn, user_data}) : nullptr;
  std::lock_guard lock(mu_);
  subscriber_ = std::move(next);
  has_subscriber_.store(fn != nullptr, std::memory_order_relaxed);
  active_.store(fn != nullptr || tap_.load() != nullptr, std::memory_order_relaxed);
}

void EventHub::set_tap(std::shared_ptr<EventTap> tap) {
  std::lock_guard lock(mu_);
  tap_.store(tap.get(), std::memory_order_release);
  if (tap) taps_.push_back(std::move(tap));
  active_.store(subscriber_ != nullptr || tap_.load() != nullptr, std::memory_order_relaxed);
}

void EventHub::emit(gf_event &event) const {
  event.struct_size = sizeof(gf_event);
  if (!has_subscriber_.load(std::memory_order_relaxed)) return;
  std::shared_ptr<const Subscriber> s;
  {
    std::lock_guard lock(mu_);
    s = subscriber_;
  }
  if (s) s->fn(&event, s->user_data);
}

void EventHub::emit_batch(gf_event *events, size_t count) const {
  for (size_t i = 0; i < count; ++i) events[i].struct_size = sizeof(gf_event);
  if (!has_subscriber_.load(std::memory_order_relaxed)) return;
  std::shared_ptr<const Subscriber> s;
  {
    std::lock_guard lock(mu_);
    s = subscriber_;
  }
  if (!s) return;
  for (size_t i = 0; i < count; ++i) s->fn(&events[i], s->user_data);
}

}  // namespace gf
