#include "scheduler/run_setup.hpp"

#include <memory>
#include <system_error>

namespace gf {

void set_up_tasks(RunState &run, const GraphAnalysis &analysis) {
  // Each element is set up right after it is made, while its cache lines are still at hand: a
  // large graph's arrays are far bigger than the caches, and a second pass over them (resize,
  // then a loop) would miss them all again.
  const size_t n = run.graph().task_count();
  run.tasks.reserve(n);
  for (TaskIndex t = 0; t < n; ++t) {
    const uint32_t predecessors = analysis.predecessor_count[t];
    run.tasks.emplace_back().remaining_deps = predecessors;
    if (predecessors > 1) {
      if (!run.join_counts) run.join_counts = std::make_unique_for_overwrite<uint32_t[]>(n);
      run.join_counts[t] = predecessors;
    }
  }
}

DataSetup::DataSetup(RunState &run) : run_(run) {
  if (run.graph().data_count() >= kHelperDataCount && std::thread::hardware_concurrency() > 1) {
    try {
      helper_ = std::thread([this] { run_setup(); });
      return;
    } catch (const std::system_error &) {
      // No thread to be had (a process limit): set up here instead.
    }
  }
  run_setup();
}

DataSetup::~DataSetup() {
  if (helper_.joinable()) helper_.join();
}

void DataSetup::finish() {
  if (helper_.joinable()) helper_.join();
  if (failed_) std::rethrow_exception(failed_);
}

void DataSetup::run_setup() noexcept {
  try {
    const Graph &graph = run_.graph();
    run_.data.reserve(graph.data_count());
    bool has_values = false;
    for (DataIndex d = 0; d < graph.data_count(); ++d) {
      const DataDesc &desc = graph.data(d);
      DataRun &data = run_.data.emplace_back();
      data.consumers_left = desc.consumer_slots;
      data.keep = (desc.flags & GF_DATA_KEEP) || desc.consumer_slots == 0;
      data.size = desc.size;
      has_values |= desc.kind == DataKind::kValue;
      if (desc.origin == DataOrigin::kHostBuffer) {
        data.phase = DataRun::Phase::kReady;
        data.replicas.push_back(Replica{kHostSpace, false, const_cast<void *>(desc.host_bytes)});
      } else if (desc.origin == DataOrigin::kHostValue) {
        data.phase = DataRun::Phase::kReady;
        data.value = desc.host_value;
      }
    }
    run_.has_values = has_values;
  } catch (...) {
    failed_ = std::current_exception();
  }
}

}  // namespace gf
