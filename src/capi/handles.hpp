// Opaque handles. A handle is not a pointer to the object but a (type, slot, generation) triple
// packed into a pointer-sized value, looked up in a per-type table; a destroyed, forged or
// wrong-type handle therefore fails the lookup instead of touching freed memory.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "core/error.hpp"

namespace gf::capi {

static_assert(sizeof(void *) == 8, "handles pack 64 bits into a pointer");

template <class Object, uint64_t Tag>
class HandleTable {
 public:
  uint64_t insert(std::shared_ptr<Object> object) {
    std::unique_lock lock(mu_);
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      index = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    slots_[index].object = std::move(object);
    return encode(index, slots_[index].generation);
  }

  // The object, or nullptr. The pointer stays valid until the handle is removed, which the C
  // API's contracts order after every other use of the same handle.
  Object *find(uint64_t handle) const {
    uint32_t index, generation;
    if (!decode(handle, index, generation)) return nullptr;
    std::shared_lock lock(mu_);
    if (index >= slots_.size() || slots_[index].generation != generation) return nullptr;
    return slots_[index].object.get();
  }

  std::shared_ptr<Object> find_shared(uint64_t handle) const {
    uint32_t index, generation;
    if (!decode(handle, index, generation)) return nullptr;
    std::shared_lock lock(mu_);
    if (index >= slots_.size() || slots_[index].generation != generation) return nullptr;
    return slots_[index].object;
  }

  // Takes the object out of the table (nullptr if the handle is not live).
  std::shared_ptr<Object> remove(uint64_t handle) {
    uint32_t index, generation;
    if (!decode(handle, index, generation)) return nullptr;
    std::unique_lock lock(mu_);
    if (index >= slots_.size() || slots_[index].generation != generation) return nullptr;
    Slot &slot = slots_[index];
    slot.generation = (slot.generation + 1) & kGenerationMask;
    if (slot.generation == 0) slot.generation = 1;
    free_.push_back(index);
    return std::move(slot.object);
  }

 private:
  static constexpr uint64_t kGenerationMask = (uint64_t{1} << 28) - 1;
  struct Slot {
    uint32_t generation = 1;
    std::shared_ptr<Object> object;
  };
  static uint64_t encode(uint32_t index, uint32_t generation) {
    return (Tag << 60) | (uint64_t{generation} << 32) | (uint64_t{index} + 1);
  }
  static bool decode(uint64_t handle, uint32_t &index, uint32_t &generation) {
    if ((handle >> 60) != Tag || (handle & 0xffffffffu) == 0) return false;
    index = static_cast<uint32_t>((handle & 0xffffffffu) - 1);
    generation = static_cast<uint32_t>((handle >> 32) & kGenerationMask);
    return true;
  }

  mutable std::shared_mutex mu_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

template <class Handle>
uint64_t handle_bits(const Handle *handle) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
}

template <class Handle>
Handle *handle_from_bits(uint64_t bits) {
  return reinterpret_cast<Handle *>(static_cast<uintptr_t>(bits));
}

}  // namespace gf::capi
