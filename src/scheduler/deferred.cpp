#include "scheduler/deferred.hpp"

#include "scheduler/run_state.hpp"

namespace gf {

void Deferred::flush(DeviceBackend &backend) {
  for (const Free &f : frees) backend.deallocate(f.space, f.ptr, f.bytes);
  frees.clear();
  for (auto &[object, destroy] : destroys) destroy(object);
  destroys.clear();
  // Moved out first: a call may flush a Deferred of its own, never this one.
  std::vector<std::function<void()>> pending = std::move(calls);
  calls.clear();
  for (auto &call : pending) call();
  for (auto &run : finished_runs) run->completion.publish();
  finished_runs.clear();  // may destroy runs, and with the last of them their pool
  dropped_runs.clear();
}

}  // namespace gf
