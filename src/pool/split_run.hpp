// A graph split between this process and the node's service (GF_RUN_SPLIT; docs/transport.md,
// "Mixed graphs"): kernels only the service has run there, everything else here. The graph runs
// in steps: a task's step is the highest step of its predecessors, plus one where the
// predecessor runs on the other side. Each step is at most two parts run at once, one in this
// process (a LocalRun on the pool) and one in the service (a ServiceRun); a buffer one part
// produces for a later one is read back when its step ends and goes into the later part as a
// host input (so to the service it travels over the data plane inside the part's document, and
// placement there charges its copy to a device like any host input's). A task whose predecessor
// failed or was cancelled is not run: it fails (or is cancelled) as it would in one run.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "runtime/published_run.hpp"

namespace gf {

class PoolCore;

class SplitRun final : public PublishedRun, public std::enable_shared_from_this<SplitRun> {
 public:
  SplitRun(std::shared_ptr<PoolCore> pool, std::shared_ptr<Graph> graph);
  ~SplitRun() override;

  // Freezes the graph, works out its steps and starts running them on a thread of the run's.
  // Throws what the graph's checks throw (a value that would cross between the two sides).
  void start() override;

  const Graph &graph() const override { return *graph_; }
  gf_run_where where() const override { return GF_RUN_SPLIT; }
  gf_run_state state() override;
  void cancel() override;
  void release(std::function<void()> forget) override;
  TaskRecord task(TaskIndex t) override;
  RunStats snapshot() override;
  std::string failure_summary() override;
  uint64_t read_buffer(DataIndex d, void *dst, uint64_t capacity) override;
  void *read_value(DataIndex d) override;

 private:
  struct PartRun {
    Graph::Part part;
    std::shared_ptr<Run> run;
  };
  // What became of a task that no part ran (a predecessor failed, or the run was cancelled).
  struct Skipped {
    gf_task_state state = GF_TASK_WAITING;
    std::string error;
  };
  void drive();
  void finish();  // the run's state and summary once every step ran (mu_ held)
  // Runs the parts of one step at once and waits for them.
  void run_step(const std::vector<TaskIndex> &here, const std::vector<TaskIndex> &there);
  // Marks what a finished part's tasks did, dooms their successors, reads moving buffers.
  void settle(size_t part);
  // Successors of `t` not run yet will not run (mu_ held).
  void doom_successors(TaskIndex t, TaskIndex cause);

  std::shared_ptr<PoolCore> pool_;
  std::shared_ptr<Graph> graph_;
  std::vector<bool> in_service_;
  std::vector<uint32_t> step_;  // by task
  uint32_t steps_ = 0;
  std::vector<TaskIndex> order_;  // topological
  std::vector<bool> crosses_;     // by data: a task of another part than its producer's reads it
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  std::mutex mu_;
  gf_run_state state_ = GF_RUN_RUNNING;
  bool cancelled_ = false;
  std::string summary_;
  double elapsed_s_ = 0;
  std::vector<PartRun> parts_;                       // in the order they ran
  std::vector<uint32_t> part_of_;                    // by task: index into parts_, or UINT32_MAX
  std::vector<uint32_t> index_in_part_;              // by task
  std::map<TaskIndex, Skipped> skipped_;             // tasks no part ran
  std::vector<TaskIndex> doomed_by_;                 // by task: the failed predecessor, or kNoIndex
  std::map<DataIndex, std::vector<uint8_t>> moved_;  // buffers read back for a later part
  std::map<DataIndex, std::pair<uint32_t, DataIndex>> produced_in_;  // data -> (part, its index)
};

}  // namespace gf
