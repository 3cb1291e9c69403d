// One worker's resource ledger: what it advertises (capacity) and what is held right now
// (in use). The scheduler charges a task's request before its body starts and releases it after
// the body ends, whatever the outcome; device memory held by data is charged here too. The
// invariant 0 <= in_use <= capacity is checked on every change.
#pragma once

#include <vector>

#include "core/fixed_point.hpp"
#include "scheduler/resource_registry.hpp"

namespace gf {

class Ledger {
 public:
  struct Line {
    ResourceId resource;
    FixedPoint capacity;
    FixedPoint in_use;
    FixedPoint peak;
  };

  void advertise(ResourceId resource, FixedPoint capacity);

  // Whether the worker could ever satisfy the request (every resource advertised, enough).
  bool could_fit(const PoolRequest &request, FixedPoint extra_memory = {},
                 ResourceId memory = UINT32_MAX) const {
    return fits(request, extra_memory, memory, false);
  }
  // Whether the request fits in what is free now; extra_memory is added to `memory`'s amount.
  bool fits_now(const PoolRequest &request, FixedPoint extra_memory = {},
                ResourceId memory = UINT32_MAX) const {
    return fits(request, extra_memory, memory, true);
  }
  void acquire(const PoolRequest &request);
  void release(const PoolRequest &request);

  FixedPoint free_amount(ResourceId resource) const;
  bool try_charge(ResourceId resource, FixedPoint amount);
  void discharge(ResourceId resource, FixedPoint amount);

  const std::vector<Line> &lines() const { return lines_; }
  bool idle() const;  // nothing in use

 private:
  bool fits(const PoolRequest &request, FixedPoint extra_memory, ResourceId memory,
            bool count_in_use) const;
  const Line *find(ResourceId resource) const;
  Line *find(ResourceId resource);
  std::vector<Line> lines_;  // few lines per worker: a linear scan beats a map
};

}  // namespace gf
