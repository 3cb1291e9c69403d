// Opaque handles. A handle is not a pointer to the object but a (type, slot, generation) triple
// packed into a pointer-sized value, looked up in a per-type table; a destroyed, forged or
// wrong-type handle therefore fails the lookup instead of touching freed memory.
//
// find() takes no lock: it is on the path of every call that builds a graph or waits on a run.
// Slots live in segments that never move once made (segment k holds kFirstSegment << k slots),
// and a slot's generation and object pointer are atomics, so a lookup reads them while another
// thread inserts or removes other handles. Inserting, removing and find_shared(), which takes a
// reference, hold the table's mutex.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.hpp"

namespace gf::capi {

static_assert(sizeof(void *) == 8, "handles pack 64 bits into a pointer");

template <class Object, uint64_t Tag>
class HandleTable {
 public:
  HandleTable() = default;
  HandleTable(const HandleTable &) = delete;
  HandleTable &operator=(const HandleTable &) = delete;
  ~HandleTable() {
    for (auto &segment : segments_) delete[] segment.load(std::memory_order_relaxed);
  }

  uint64_t insert(std::shared_ptr<Object> object) {
    std::lock_guard lock(mu_);
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      if (size_ == kMaxSlots) fail(GF_ERR_OUT_OF_MEMORY, "too many live handles of one kind");
      index = size_++;
      std::atomic<Slot *> &segment = segments_[segment_of(index)];
      if (!segment.load(std::memory_order_relaxed)) {
        segment.store(new Slot[segment_size(segment_of(index))], std::memory_order_release);
      }
    }
    Slot &slot = slot_at(index);
    slot.raw.store(object.get(), std::memory_order_release);
    slot.owner = std::move(object);
    return encode(index, slot.generation.load(std::memory_order_relaxed));
  }

  // The object, or nullptr. The pointer stays valid until the handle is removed, which the C
  // API's contracts order after every other use of the same handle.
  Object *find(uint64_t handle) const {
    uint32_t index, generation;
    if (!decode(handle, index, generation)) return nullptr;
    const Slot *slot = find_slot(index);
    if (!slot || slot->generation.load(std::memory_order_acquire) != generation) return nullptr;
    Object *object = slot->raw.load(std::memory_order_acquire);
    // A remove (generation first, then the pointer) and an insert into the slot between the two
    // loads would hand out the slot's next object: the generation, read again, tells.
    if (slot->generation.load(std::memory_order_acquire) != generation) return nullptr;
    return object;
  }

  std::shared_ptr<Object> find_shared(uint64_t handle) const {
    uint32_t index, generation;
    if (!decode(handle, index, generation)) return nullptr;
    std::lock_guard lock(mu_);
    const Slot *slot = find_slot(index);
    if (!slot || slot->generation.load(std::memory_order_relaxed) != generation) return nullptr;
    return slot->owner;
  }

  // Takes the object out of the table (nullptr if the handle is not live).
  std::shared_ptr<Object> remove(uint64_t handle) {
    uint32_t index, generation;
    if (!decode(handle, index, generation)) return nullptr;
    std::lock_guard lock(mu_);
    Slot *slot = find_slot(index);
    if (!slot || slot->generation.load(std::memory_order_relaxed) != generation) return nullptr;
    uint32_t next = (generation + 1) & kGenerationMask;
    if (next == 0) next = 1;
    slot->generation.store(next, std::memory_order_release);
    slot->raw.store(nullptr, std::memory_order_release);
    free_.push_back(index);
    return std::move(slot->owner);
  }

 private:
  static constexpr uint64_t kGenerationMask = (uint64_t{1} << 28) - 1;
  static constexpr uint32_t kFirstSegment = 64;
  static constexpr size_t kSegments = 26;  // kFirstSegment * (2^26 - 1) slots in all
  static constexpr uint32_t kMaxSlots = uint32_t{kFirstSegment} * ((uint32_t{1} << 26) - 1);
  struct Slot {
    std::atomic<uint32_t> generation{1};
    std::atomic<Object *> raw{nullptr};
    std::shared_ptr<Object> owner;  // under mu_
  };
  static size_t segment_of(uint32_t index) {
    return static_cast<size_t>(std::bit_width(index / kFirstSegment + 1) - 1);
  }
  static size_t segment_size(size_t segment) { return size_t{kFirstSegment} << segment; }
  static uint32_t offset_in(uint32_t index, size_t segment) {
    return index - kFirstSegment * ((uint32_t{1} << segment) - 1);
  }
  Slot &slot_at(uint32_t index) {
    const size_t segment = segment_of(index);
    return segments_[segment].load(std::memory_order_relaxed)[offset_in(index, segment)];
  }
  Slot *find_slot(uint32_t index) const {
    if (index >= kMaxSlots) return nullptr;
    const size_t segment = segment_of(index);
    Slot *slots = segments_[segment].load(std::memory_order_acquire);
    return slots ? &slots[offset_in(index, segment)] : nullptr;
  }
  static uint64_t encode(uint32_t index, uint32_t generation) {
    return (Tag << 60) | (uint64_t{generation} << 32) | (uint64_t{index} + 1);
  }
  static bool decode(uint64_t handle, uint32_t &index, uint32_t &generation) {
    if ((handle >> 60) != Tag || (handle & 0xffffffffu) == 0) return false;
    index = static_cast<uint32_t>((handle & 0xffffffffu) - 1);
    generation = static_cast<uint32_t>((handle >> 32) & kGenerationMask);
    return true;
  }

  mutable std::mutex mu_;
  std::array<std::atomic<Slot *>, kSegments> segments_{};
  uint32_t size_ = 0;  // slots made so far, under mu_
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
