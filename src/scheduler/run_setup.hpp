// Setting up a run's per-task and per-data state in prepare(). For a large graph this is
// megabytes written before any task can start, serial with freezing the graph: the data's state,
// which does not depend on the graph's analysis, is set up on a helper thread while the caller
// freezes the graph. Both write state the scheduler's mutex guards once the run has started, and
// before that no other thread can reach it: they run outside the mutex, unchecked by the
// thread-safety analysis.
#pragma once

#include <exception>
#include <thread>

#include "scheduler/run_state.hpp"

namespace gf {

// Each task waiting for all its predecessors (the frozen graph's analysis).
void set_up_tasks(RunState &run, const GraphAnalysis &analysis) GF_NO_THREAD_SAFETY_ANALYSIS;

// The run's data state: counts of consumers, sizes, the caller's host inputs ready. Begun on
// construction, on a helper thread when the graph has at least kHelperDataCount data objects
// (inline otherwise); finish() waits for it and rethrows what it threw. The destructor waits
// too, so a prepare that fails on the way leaves nothing running.
class DataSetup {
 public:
  static constexpr size_t kHelperDataCount = 65536;
  explicit DataSetup(RunState &run);
  ~DataSetup();
  DataSetup(const DataSetup &) = delete;
  DataSetup &operator=(const DataSetup &) = delete;
  void finish();

 private:
  void run_setup() noexcept GF_NO_THREAD_SAFETY_ANALYSIS;
  RunState &run_;
  std::thread helper_;
  std::exception_ptr failed_;
};

}  // namespace gf
