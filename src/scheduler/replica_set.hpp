// Where a data object's bytes are: usually one place, sometimes a few. One replica lives inline,
// so producing an output costs no allocation beyond the bytes themselves; a second (a copy moved
// to a device, a spill) allocates a small vector, which costs little next to moving the bytes.
// Only one inline: a run's data states are all written before any task starts, and every data
// object of every run would pay for a second.
#pragma once

#include <algorithm>
#include <array>
#include <memory>
#include <utility>
#include <vector>

#include "devices/backend.hpp"

namespace gf {

struct Replica {
  Replica() = default;
  Replica(SpaceId in_space, bool is_owned, void *at, uint64_t tick = 0, bool is_value = false)
      : ptr(at), lru_tick(tick), space(in_space), owned(is_owned), value(is_value) {}
  void *ptr = nullptr;
  uint64_t lru_tick = 0;  // device replicas: key in the device's spill order (0: not listed)
  SpaceId space = 0;
  bool owned = false;  // false for caller-owned host input bytes
  // A form of an opaque value set with gf_task_ctx_set_device_value (its device form, or the
  // host form its spill function returned): released by the value's destroy function, never
  // deallocated by the backend.
  bool value = false;
};

class ReplicaSet {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  const Replica &front() const { return *begin(); }
  const Replica *begin() const { return spilled() ? overflow_->data() : inline_.data(); }
  const Replica *end() const { return begin() + size_; }
  Replica *begin() { return spilled() ? overflow_->data() : inline_.data(); }
  Replica *end() { return begin() + size_; }
  Replica *find(SpaceId space) {
    for (Replica &r : *this) {
      if (r.space == space) return &r;
    }
    return nullptr;
  }
  void remove(SpaceId space) {
    std::vector<Replica> kept;
    for (const Replica &r : std::as_const(*this)) {
      if (r.space != space) kept.push_back(r);
    }
    overflow_.reset();
    size_ = 0;
    for (const Replica &r : kept) push_back(r);
  }

  void push_back(const Replica &r) {
    if (size_ < inline_.size()) {
      // Field by field: a copy of the whole struct, built just before on the stack from stores
      // of other widths, stalled on store forwarding (perf: most of storing a task's output,
      // under the scheduler's mutex).
      Replica &slot = inline_[size_++];
      slot.ptr = r.ptr;
      slot.lru_tick = r.lru_tick;
      slot.space = r.space;
      slot.owned = r.owned;
      slot.value = r.value;
      return;
    }
    push_back_past_inline(r);
  }

  void remove_owned() {
    // Mostly every copy is owned (a task's output freed after its last consumer): none is kept.
    // One inline copy, the commonest, skips the general path's checks.
    if (size_ == 1 && inline_[0].owned) {
      size_ = 0;
      return;
    }
    if (std::all_of(begin(), end(), [](const Replica &r) { return r.owned; })) {
      overflow_.reset();
      size_ = 0;
      return;
    }
    std::vector<Replica> kept;
    for (const Replica &r : std::as_const(*this)) {
      if (!r.owned) kept.push_back(r);
    }
    overflow_.reset();
    size_ = 0;
    for (const Replica &r : kept) push_back(r);
  }

 private:
  bool spilled() const { return size_ > inline_.size(); }
  // Out of line: producing an output (the first copy) is on every task's path, a second copy
  // is not.
  [[gnu::noinline]] void push_back_past_inline(const Replica &r) {
    if (!spilled()) {
      overflow_ = std::make_unique<std::vector<Replica>>();
      overflow_->reserve(3);  // host, a device, another: one allocation for the bytes
      overflow_->assign(inline_.begin(), inline_.end());
    }
    overflow_->push_back(r);
    ++size_;
  }
  std::array<Replica, 1> inline_{};
  // Data on two memory spaces or more: allocated only then, so that every data object of a run
  // does not carry an empty vector.
  std::unique_ptr<std::vector<Replica>> overflow_;
  uint32_t size_ = 0;
};

}  // namespace gf
