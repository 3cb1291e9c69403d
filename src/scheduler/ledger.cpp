#include "scheduler/ledger.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace gf {

void Ledger::advertise(ResourceId resource, FixedPoint capacity) {
  if (Line *line = find(resource)) {
    line->capacity += capacity;
  } else {
    lines_.push_back(Line{resource, capacity, {}, {}});
  }
}

const Ledger::Line *Ledger::find(ResourceId resource) const {
  for (const Line &line : lines_) {
    if (line.resource == resource) return &line;
  }
  return nullptr;
}

Ledger::Line *Ledger::find(ResourceId resource) {
  return const_cast<Line *>(static_cast<const Ledger *>(this)->find(resource));
}

bool Ledger::fits(const PoolRequest &request, FixedPoint extra_memory, ResourceId memory,
                  bool count_in_use) const {
  auto enough = [&](const Line *line, FixedPoint need) {
    return line && (count_in_use ? line->in_use + need : need) <= line->capacity;
  };
  bool memory_seen = extra_memory.is_zero();
  for (const auto &[resource, amount] : request) {
    FixedPoint need = amount;
    if (resource == memory) {
      need += extra_memory;
      memory_seen = true;
    }
    if (!enough(find(resource), need)) return false;
  }
  return memory_seen || enough(find(memory), extra_memory);
}

void Ledger::acquire(const PoolRequest &request) {
  for (const auto &[resource, amount] : request) {
    Line *line = find(resource);
    if (!line || line->in_use + amount > line->capacity) {
      fail(GF_ERR_INTERNAL, "ledger over-commit on resource acquire");
    }
    line->in_use += amount;
    line->peak = std::max(line->peak, line->in_use);
  }
}

void Ledger::release(const PoolRequest &request) {
  for (const auto &[resource, amount] : request) discharge(resource, amount);
}

FixedPoint Ledger::free_amount(ResourceId resource) const {
  const Line *line = find(resource);
  return line ? line->capacity - line->in_use : FixedPoint{};
}

bool Ledger::try_charge(ResourceId resource, FixedPoint amount) {
  Line *line = find(resource);
  if (!line || line->in_use + amount > line->capacity) return false;
  line->in_use += amount;
  line->peak = std::max(line->peak, line->in_use);
  return true;
}

void Ledger::discharge(ResourceId resource, FixedPoint amount) {
  Line *line = find(resource);
  if (!line || amount > line->in_use) fail(GF_ERR_INTERNAL, "ledger released more than held");
  line->in_use -= amount;
}

bool Ledger::idle() const {
  return std::all_of(lines_.begin(), lines_.end(),
                     [](const Line &line) { return line.in_use.is_zero(); });
}

}  // namespace gf
