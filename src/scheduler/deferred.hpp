// Work the scheduler decides under its mutex but must do after releasing it: freeing memory,
// running caller destructors and completion callbacks, and dropping the last reference to a run
// (whose destructor may release a pool).
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "devices/backend.hpp"

namespace gf {

class RunState;

struct Deferred {
  struct Free {
    SpaceId space;
    void *ptr;
    uint64_t bytes;
  };
  std::vector<Free> frees;
  std::vector<std::pair<void *, gf_destroy_fn>> destroys;
  // Calls into the caller's runtime that must not run under the mutex (moving device values
  // through their gf_value_ops); each takes the mutex again itself to record the outcome.
  std::vector<std::function<void()>> calls;
  std::vector<std::shared_ptr<RunState>> finished_runs;  // publish completion, then drop
  std::vector<std::shared_ptr<RunState>> dropped_runs;   // the scheduler is done with them

  bool empty() const {
    return frees.empty() && destroys.empty() && calls.empty() && finished_runs.empty() &&
           dropped_runs.empty();
  }
  // Must be called without the scheduler mutex held.
  void flush(DeviceBackend &backend);
};

}  // namespace gf
