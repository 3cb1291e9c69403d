#include "scheduler/device_memory.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace gf {
const Ledger::Line &DeviceMemory::line() const {
  for (const auto &line : ledger_->lines()) {
    if (line.resource == resource_) return line;
  }
  fail(GF_ERR_INTERNAL, "a device worker advertises no gpu_memory");
}

uint64_t DeviceMemory::capacity() const {
  return whole_bytes(line().capacity);
}

uint64_t DeviceMemory::in_use() const {
  return whole_bytes(line().in_use);
}

uint64_t DeviceMemory::free() const {
  const Ledger::Line &l = line();
  return whole_bytes(l.capacity - l.in_use);
}

uint64_t DeviceMemory::shortfall(FixedPoint request_memory, uint64_t bytes) const {
  const Ledger::Line &l = line();
  FixedPoint short_by = request_memory + FixedPoint::from_bytes(bytes) - (l.capacity - l.in_use);
  // Rounded up: making room for a fraction of a byte still takes a byte.
  return short_by.raw() <= 0 ? 0
                             : static_cast<uint64_t>((short_by.raw() + FixedPoint::kScale - 1) /
                                                     FixedPoint::kScale);
}

}  // namespace gf
